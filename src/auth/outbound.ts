// The only way the server fetches a URL a tenant chose (ClientApplication.identityProvider.userInfoUrl, jwksUri; API.md
// §2): http(s) only, the host resolved and every address checked — loopback, private, link-local and other
// non-public ranges (RFC 6890, https://www.iana.org/assignments/iana-ipv4-special-registry) are refused unless the
// operator lists the host in allowedOutboundHosts — then the connection goes to the checked address (no second DNS
// answer can slip in), without redirects, with a deadline and a size cap.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (default: the system resolver, as `getaddrinfo` sees /etc/hosts). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundPolicy {
  /** Config `allowedOutboundHosts`: `host` or `host:port` entries that may resolve to refused addresses. */
  allowedHosts: readonly string[];
  resolve?: Resolver;
  /** How long a DNS answer may take (default 3000 ms). */
  resolveTimeoutMs?: number;
}

/** Why an outbound request failed: for the log only, never for the caller's answer. */
export type OutboundReason =
  'bad-url' | 'refused-address' | 'unresolved' | 'unreachable' | 'timeout' | 'too-large';

export class OutboundError extends Error {
  constructor(
    readonly reason: OutboundReason,
    readonly code?: string,
  ) {
    super(`Outbound request failed: ${reason}`);
    this.name = 'OutboundError';
  }
}

const systemResolver: Resolver = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

// IPv4 ranges that are not public unicast (RFC 6890 and successors): [first octets as a number, prefix length].
const REFUSED_V4: readonly [string, number][] = [
  ['0.0.0.0', 8], // "this network", 0.0.0.0 unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

function v4ToNumber(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function refusedV4(ip: string): boolean {
  const n = v4ToNumber(ip);
  return REFUSED_V4.some(
    ([base, bits]) => Math.floor(n / 2 ** (32 - bits)) === Math.floor(v4ToNumber(base) / 2 ** (32 - bits)),
  );
}

/** The eight 16-bit groups of an IPv6 address (any textual form, embedded IPv4 included). */
function v6Groups(ip: string): number[] {
  // The URL parser canonicalises (`::ffff:127.0.0.1` → `::ffff:7f00:1`), so only `::` is left to expand.
  const canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  const [head, tail] = canonical.includes('::') ? canonical.split('::') : [canonical, undefined];
  const parse = (s: string | undefined): number[] => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return tail === undefined
    ? left
    : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * IPv6: only global unicast (2000::/3) is public; inside it the documentation, Teredo, benchmarking, 6to4 and ORCHID
 * ranges are refused too. Everything else — `::`, `::1`, IPv4-mapped and -compatible, NAT64, ULA fc00::/7,
 * link-local fe80::/10, multicast — lies outside 2000::/3.
 */
function refusedV6(ip: string): boolean {
  const g = v6Groups(ip);
  const [a = 0, b = 0] = g;
  if (a < 0x2000 || a > 0x3fff) return true;
  if (a === 0x2001 && (b === 0 || b === 0x0db8 || b === 2 || (b >= 0x10 && b <= 0x2f))) return true;
  if (a === 0x2002) return true; // 6to4 embeds any IPv4 address
  if (a === 0x3fff && b < 0x1000) return true; // documentation 3fff::/20
  return false;
}

/** Whether an IP address (v4 or v6 text, an IPv6 zone suffix allowed) is outside public unicast. */
export function isRefusedAddress(ip: string): boolean {
  const bare = ip.replace(/%.*$/, '');
  if (net.isIPv4(bare)) return refusedV4(bare);
  if (net.isIPv6(bare)) return refusedV6(bare);
  return true;
}

/** An allowedOutboundHosts entry (`host`, `host:port`, `[v6]:port` or a bare IPv6 address) in URL-canonical form. */
function parseAllowedEntry(entry: string): { host: string; port?: string } | undefined {
  let e = entry.trim();
  if (net.isIPv6(e)) e = `[${e}]`; // a bare IPv6 address names the host, not host:port
  const m = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d+))?$/.exec(e);
  if (!m) return undefined;
  try {
    // The URL parser writes every host as the request URL has it: lower case, `[::ffff:7f00:1]`, `127.0.0.1`.
    const host = new URL(`http://${m[1] as string}/`).hostname.replace(/\.$/, '');
    return m[2] ? { host, port: String(Number(m[2])) } : { host };
  } catch {
    return undefined;
  }
}

/** Whether the operator allows this URL's host (`host`, or `host:port` with the effective port) to be internal. */
export function isAllowedHost(url: URL, allowedHosts: readonly string[]): boolean {
  const host = url.hostname.replace(/\.$/, '');
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return allowedHosts.some((entry) => {
    const e = parseAllowedEntry(entry);
    return e !== undefined && e.host === host && (e.port === undefined || e.port === port);
  });
}

/** Parses a tenant's URL: absolute, http or https. */
export function parseOutboundUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError('bad-url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError('bad-url');
  return url;
}

async function resolveWithin(hostname: string, policy: OutboundPolicy): Promise<ResolvedAddress[]> {
  const resolve = policy.resolve ?? systemResolver;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new OutboundError('unresolved', 'ETIMEOUT')),
      policy.resolveTimeoutMs ?? 3000,
    );
  });
  try {
    const addresses = await Promise.race([resolve(hostname), deadline]);
    if (addresses.length === 0) throw new OutboundError('unresolved', 'ENODATA');
    return addresses;
  } catch (err) {
    if (err instanceof OutboundError) throw err;
    throw new OutboundError('unresolved', String((err as { code?: unknown }).code ?? ''));
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The address to connect to for `url`, checked against the policy: an IP literal as it is, a name through DNS with
 * every address it resolves to checked (one internal address among public ones is enough to refuse).
 */
export async function vetUrl(url: URL, policy: OutboundPolicy): Promise<ResolvedAddress> {
  const allowed = isAllowedHost(url, policy.allowedHosts);
  const literal = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const family = net.isIP(literal);
  const addresses: ResolvedAddress[] =
    family === 4 || family === 6
      ? [{ address: literal, family }]
      : await resolveWithin(url.hostname.replace(/\.$/, ''), policy);
  if (!allowed && addresses.some((a) => isRefusedAddress(a.address)))
    throw new OutboundError('refused-address');
  return addresses[0] as ResolvedAddress;
}

/**
 * The save-time check (API.md §2): refused when the URL names, or resolves to, a refused address. A name that does
 * not resolve (yet) passes — it is checked again at each use — and so does text that is not an http(s) URL, which is
 * never fetched.
 */
export async function outboundTargetRefused(text: string, policy: OutboundPolicy): Promise<boolean> {
  let url: URL;
  try {
    url = parseOutboundUrl(text);
  } catch {
    return false;
  }
  try {
    await vetUrl(url, policy);
    return false;
  } catch (err) {
    return err instanceof OutboundError && err.reason === 'refused-address';
  }
}

export interface OutboundResponse {
  status: number;
  body: string;
}

export interface OutboundRequest {
  /** GET (default) or POST with `body` (e.g. a form to a token endpoint). */
  method?: 'GET' | 'POST';
  body?: string;
  headers?: Record<string, string>;
  /** Deadline of the whole request, connect to last byte (default 5000 ms). */
  timeoutMs?: number;
  /** Largest body accepted (default 1 MiB). */
  maxBytes?: number;
}

/** GET of a tenant's URL under the policy. Throws OutboundError; any HTTP status (3xx included) is a response. */
export function outboundGet(
  text: string,
  policy: OutboundPolicy,
  req: OutboundRequest = {},
): Promise<OutboundResponse> {
  return outboundRequest(text, policy, { ...req, method: 'GET' });
}

/** A request (GET, or POST with a body) to a tenant's URL under the policy, as outboundGet. */
export async function outboundRequest(
  text: string,
  policy: OutboundPolicy,
  req: OutboundRequest = {},
): Promise<OutboundResponse> {
  const started = Date.now();
  const timeoutMs = req.timeoutMs ?? 5000;
  const maxBytes = req.maxBytes ?? 1024 * 1024;
  const url = parseOutboundUrl(text);
  const target = await vetUrl(url, policy);
  const remaining = Math.max(1, timeoutMs - (Date.now() - started));
  const request = url.protocol === 'https:' ? https.request : http.request;
  return new Promise<OutboundResponse>((resolve, reject) => {
    let settled = false;
    const finish = (err: OutboundError | undefined, res?: OutboundResponse): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        r.destroy();
        reject(err);
      } else resolve(res as OutboundResponse);
    };
    const r = request(url, {
      method: req.method ?? 'GET',
      headers: {
        ...(req.headers ?? {}),
        ...(req.body !== undefined ? { 'content-length': String(Buffer.byteLength(req.body)) } : {}),
      },
      // A fresh connection each time: a pooled socket would skip the check above.
      agent: false,
      // Connect to the vetted address, whatever DNS would answer now. (net may ask for all addresses.)
      lookup: (_host, opts, cb) => {
        const done = cb as (...args: unknown[]) => void;
        if ((opts as { all?: boolean }).all) done(null, [target]);
        else done(null, target.address, target.family);
      },
    });
    const timer = setTimeout(() => finish(new OutboundError('timeout')), remaining);
    r.on('error', (e: NodeJS.ErrnoException) => finish(new OutboundError('unreachable', e.code ?? e.name)));
    r.on('response', (res) => {
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) return finish(new OutboundError('too-large'));
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) return finish(new OutboundError('too-large'));
        chunks.push(chunk);
      });
      res.on('end', () =>
        finish(undefined, { status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', (e: NodeJS.ErrnoException) =>
        finish(new OutboundError('unreachable', e.code ?? e.name)),
      );
    });
    r.end(req.body);
  });
}
