// The chain's link hash and who may verify a chain (src/audit/chain.ts, assertAuditChainAccess in src/fhir/access.ts).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { assertAuditChainAccess, type Actor } from '../fhir/access.js';
import { FhirError } from '../fhir/outcome.js';
import { GENESIS_HASH, linkHash } from './chain.js';

describe('linkHash', () => {
  it("is hex sha256 of the previous hash, a line feed and the hex sha256 of the content's UTF-8", () => {
    const content = '{"resourceType":"AuditEvent","id":"é"}';
    expect(GENESIS_HASH).toBe('0'.repeat(64));
    const ofContent = createHash('sha256').update(Buffer.from(content, 'utf8')).digest('hex');
    expect(linkHash(GENESIS_HASH, content)).toBe(
      createHash('sha256')
        .update(Buffer.from(`${'0'.repeat(64)}\n${ofContent}`, 'utf8'))
        .digest('hex'),
    );
    expect(linkHash(GENESIS_HASH, content)).not.toBe(linkHash(GENESIS_HASH, `${content} `));
    expect(linkHash('1'.repeat(64), content)).not.toBe(linkHash(GENESIS_HASH, content));
  });
});

describe('assertAuditChainAccess', () => {
  const actor = (a: Partial<Actor>): Actor => ({
    projectId: 'p',
    projectAdmin: false,
    superAdmin: false,
    ...a,
  });
  const cases: [string, Actor, string, boolean][] = [
    ['project admin, own project', actor({ projectAdmin: true }), 'p', true],
    ['project admin, another project', actor({ projectAdmin: true }), 'q', false],
    ['project admin, the chain without a login', actor({ projectAdmin: true }), '', false],
    ['member, own project', actor({}), 'p', false],
    ['super administrator, any project', actor({ superAdmin: true }), 'q', true],
    ['super administrator, the chain without a login', actor({ superAdmin: true }), '', true],
  ];
  it.each(cases)('%s', (_name, who, project, allowed) => {
    const run = () => assertAuditChainAccess(who, project);
    if (allowed) expect(run).not.toThrow();
    else {
      expect(run).toThrow(FhirError);
      try {
        run();
      } catch (err) {
        expect((err as FhirError).status).toBe(403);
        expect((err as FhirError).code).toBe('access.audit-chain');
      }
    }
  });
});
