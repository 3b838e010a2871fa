// Raw TCP connections to a listening test server: for what an HTTP client library would hide (partial bodies,
// answers not yet sent).
import net from 'node:net';

/** A raw TCP connection to the listening server, with everything it received and whether it closed. */
export interface Raw {
  socket: net.Socket;
  received: () => string;
  closed: Promise<void>;
}
export async function connect(port: number): Promise<Raw> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  let data = '';
  socket.on('data', (d) => (data += d.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('close', () => reject(new Error('closed before connecting')));
  });
  return { socket, received: () => data, closed };
}
