// Large XML bodies are read off the event loop (a 19 MB body once held every tenant's requests for about 3 s): the
// parser hands them to `xmlOffThread` and keeps small ones on the request's thread.
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromXml } from '../../fhir/xml/index.js';
import { stringifyJson } from '../../fhir/json/stringify.js';
import { FhirError } from '../../fhir/outcome.js';
import { registerContentTypes, XML_INLINE_CHARS } from './content-types.js';

const F = 'xmlns="http://hl7.org/fhir"';
const patientXml = (names: number): string =>
  `<Patient ${F}>${'<name><family value="Family"/><given value="Given"/></name>'.repeat(names)}</Patient>`;

describe('XML request bodies', () => {
  const handed: number[] = [];
  let app: FastifyInstance;
  beforeAll(async () => {
    app = Fastify();
    registerContentTypes(app, {
      xmlOffThread: async (text) => {
        handed.push(text.length);
        if (text.includes('nickname'))
          throw new FhirError('structure', "Unknown element 'nickname'", 'xml.unknown');
        return stringifyJson(fromXml(text));
      },
    });
    app.setErrorHandler((err: Error & { status?: number }, _req, reply) =>
      reply.code(err.status ?? 500).send({ message: err.message }),
    );
    app.post('/echo', async (req) => req.body);
    await app.ready();
  });
  afterAll(() => app.close());

  const post = (body: string) =>
    app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/fhir+xml' },
      payload: body,
    });

  it('reads a small body inline and hands a large one to the worker', async () => {
    const small = patientXml(3);
    expect(small.length).toBeLessThanOrEqual(XML_INLINE_CHARS);
    const a = await post(small);
    expect(a.statusCode).toBe(200);
    expect(a.json().name).toHaveLength(3);
    expect(handed).toEqual([]);

    const large = patientXml(2000);
    expect(large.length).toBeGreaterThan(XML_INLINE_CHARS);
    const b = await post(large);
    expect(b.statusCode).toBe(200);
    expect(b.json().name).toHaveLength(2000);
    expect(handed).toEqual([large.length]);
  });

  it("answers the worker's refusal with its status", async () => {
    const res = await post(patientXml(2000).replace('</Patient>', '<nickname value="x"/></Patient>'));
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/nickname/);
  });
});
