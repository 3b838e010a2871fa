// Bounds the open connections one client address may hold (issue 12 point 12), so that one client cannot take
// every socket of the process; Node's own limit (server.maxConnections) is global, not per client.
// https://nodejs.org/api/net.html#event-connection
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Counts open sockets per remote address on the server's `connection` event and destroys a socket beyond `max`
 * at once (0: no limit). The address is the socket's peer: behind a reverse proxy every connection comes from the
 * proxy, so raise the limit (or set 0) there.
 */
export function limitConnectionsPerClient(server: Server, max: number): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
