// Unit tests of the outbound rule (API.md §2): address classes, the operator's allow list, DNS answers checked and
// then used for the connection, no redirects, deadline and size cap.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isAllowedHost,
  isRefusedAddress,
  outboundGet,
  outboundTargetRefused,
  OutboundError,
  type Resolver,
} from './outbound.js';

describe('isRefusedAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.255.254',
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '0.0.0.0',
    '100.64.0.1',
    '192.0.0.8',
    '198.18.0.1',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:8.8.8.8',
    '::127.0.0.1',
    '64:ff9b::a00:1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'fec0::1',
    'ff02::1',
    '2001:db8::1',
    '2001::1',
    '2002:7f00:1::1',
    'not an address',
  ])('refuses %s', (ip) => expect(isRefusedAddress(ip)).toBe(true));

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '172.32.0.1',
    '172.15.255.255',
    '2606:4700:4700::1111',
    '2a00:1450::1',
  ])('accepts %s', (ip) => expect(isRefusedAddress(ip)).toBe(false));
});

describe('isAllowedHost', () => {
  const allowed = (url: string, list: string[]) => isAllowedHost(new URL(url), list);
  it('matches host, or host:port with the effective port, case-insensitively', () => {
    expect(allowed('http://IdP.Local:8080/u', ['idp.local'])).toBe(true);
    expect(allowed('http://idp.local:8080/u', ['idp.local:8080'])).toBe(true);
    expect(allowed('http://idp.local:8081/u', ['idp.local:8080'])).toBe(false);
    expect(allowed('https://idp.local/u', ['idp.local:443'])).toBe(true);
    expect(allowed('http://idp.local/u', ['idp.local:443'])).toBe(false);
    expect(allowed('http://idp.local./u', ['idp.local'])).toBe(true);
    expect(allowed('http://other.local/u', ['idp.local'])).toBe(false);
    expect(allowed('http://evil.idp.local/u', ['idp.local'])).toBe(false);
    expect(allowed('http://[::1]:9000/u', ['[::1]:9000'])).toBe(true);
    expect(allowed('http://[::1]:9000/u', ['::1'])).toBe(true);
    expect(allowed('http://127.0.0.1:9000/u', [])).toBe(false);
    // Entries are read as URL hosts: any spelling of the same address matches.
    expect(allowed('http://[::ffff:127.0.0.1]:9000/u', ['[::ffff:127.0.0.1]:9000'])).toBe(true);
    expect(allowed('http://[::ffff:7f00:1]/u', ['::ffff:127.0.0.1'])).toBe(true);
    expect(allowed('http://idp.local/u', ['idp.local:80'])).toBe(true);
    expect(allowed('http://idp.local:80/u', ['idp.local:0080'])).toBe(true);
    expect(allowed('http://idp.local/u', ['idp.local:', 'idp local', ':80', ''])).toBe(false);
  });
});

describe('outboundTargetRefused (save time)', () => {
  const resolver =
    (answers: Record<string, string[]>): Resolver =>
    async (name) => {
      const list = answers[name];
      if (!list) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    };
  const policy = {
    allowedHosts: ['allowed.test'],
    resolve: resolver({
      'inside.test': ['10.1.2.3'],
      'mixed.test': ['93.184.215.14', '127.0.0.1'],
      'public.test': ['93.184.215.14', '2606:4700:4700::1111'],
      'allowed.test': ['127.0.0.1'],
    }),
  };
  it('refuses literal and resolved internal addresses, not public, unresolved or allowed ones', async () => {
    const refused = (url: string) => outboundTargetRefused(url, policy);
    expect(await refused('http://127.0.0.1/u')).toBe(true);
    expect(await refused('http://[::ffff:127.0.0.1]/u')).toBe(true);
    expect(await refused('http://2130706433/u')).toBe(true); // 127.0.0.1 as one number
    expect(await refused('http://0x7f.1/u')).toBe(true);
    expect(await refused('https://inside.test/u')).toBe(true);
    expect(await refused('https://mixed.test/u')).toBe(true);
    expect(await refused('https://public.test/u')).toBe(false);
    expect(await refused('https://not-yet.test/u')).toBe(false);
    expect(await refused('http://allowed.test:8080/u')).toBe(false);
    expect(await refused('http://93.184.215.14/u')).toBe(false);
    expect(await refused('not a url')).toBe(false); // never fetched
  });
  it('accepts a name whose DNS answer does not come in time', async () => {
    const slow: Resolver = () => new Promise(() => undefined);
    expect(
      await outboundTargetRefused('https://slow.test/u', {
        allowedHosts: [],
        resolve: slow,
        resolveTimeoutMs: 10,
      }),
    ).toBe(false);
  });
});

describe('outboundGet', () => {
  let server: http.Server;
  let port: number;
  const hanging: http.ServerResponse[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/ok') res.writeHead(200, { 'content-type': 'application/json' }).end('{"sub":"x"}');
      else if (req.url === '/redirect') res.writeHead(302, { location: '/ok' }).end();
      else if (req.url === '/big') res.writeHead(200).end('x'.repeat(2048));
      else if (req.url === '/hang') hanging.push(res);
      else if (req.url === '/host') res.writeHead(200).end(req.headers.host);
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    hanging.forEach((r) => r.destroy());
    await new Promise((r) => server.close(r));
  });
  const reason = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
      return 'resolved';
    } catch (err) {
      return err instanceof OutboundError ? err.reason : String(err);
    }
  };

  it('refuses loopback unless the host is listed, and then fetches it', async () => {
    const url = `http://127.0.0.1:${port}/ok`;
    expect(await reason(outboundGet(url, { allowedHosts: [] }))).toBe('refused-address');
    expect(await reason(outboundGet(`http://localhost:${port}/ok`, { allowedHosts: [] }))).toBe(
      'refused-address',
    );
    expect(await outboundGet(url, { allowedHosts: [`127.0.0.1:${port}`] })).toEqual({
      status: 200,
      body: '{"sub":"x"}',
    });
  });

  it('connects to the address it checked, not to a later DNS answer', async () => {
    // The name exists only in this resolver: the connection can reach the server only through the vetted answer.
    let asked = 0;
    const resolve: Resolver = async () => {
      asked++;
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const res = await outboundGet(`http://idp.rebind.test:${port}/host`, {
      allowedHosts: ['idp.rebind.test'],
      resolve,
    });
    expect(res).toEqual({ status: 200, body: `idp.rebind.test:${port}` });
    expect(asked).toBe(1);
    // Unlisted, the same answer is refused before any connection.
    expect(
      await reason(outboundGet(`http://idp.rebind.test:${port}/host`, { allowedHosts: [], resolve })),
    ).toBe('refused-address');
  });

  it('does not follow redirects, caps the size, keeps a deadline, refuses other schemes', async () => {
    const policy = { allowedHosts: ['127.0.0.1'] };
    expect((await outboundGet(`http://127.0.0.1:${port}/redirect`, policy)).status).toBe(302);
    expect(await reason(outboundGet(`http://127.0.0.1:${port}/big`, policy, { maxBytes: 1024 }))).toBe(
      'too-large',
    );
    expect(await reason(outboundGet(`http://127.0.0.1:${port}/hang`, policy, { timeoutMs: 50 }))).toBe(
      'timeout',
    );
    expect(await reason(outboundGet(`file:///etc/passwd`, policy))).toBe('bad-url');
    expect(await reason(outboundGet(`ftp://127.0.0.1/x`, policy))).toBe('bad-url');
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    expect(await reason(outboundGet(`http://127.0.0.1:${closedPort}/x`, policy))).toBe('unreachable');
  });
});
