// `npm run audit:verify -- <projectId> [--config <file>]` (issue 28 point 5): verifies one project's audit hash chain
// (src/audit/chain.ts) on the configured database and prints the result as JSON; exits 0 when the chain is intact, 1
// when it is broken, 2 on a usage or database error. `_none` names the chain of requests made without a login. The
// configuration is read as the server reads it (`--config`, CINDER_CONFIG, environment such as DATABASE_URL). An
// embedded database (no databaseUrl) can be opened only while no server uses it; with a running server, ask it
// instead: GET {fhir}/AuditEvent/$verify-chain.
import fs from 'node:fs';
import path from 'node:path';
import { createAuditChain } from '../audit/chain.js';
import { loadConfig, type Config } from '../config/config.js';
import { NO_PROJECT } from '../fhir/operations/audit-verify-chain.js';
import type { Db } from '../storage/db.js';
import { hasEmbeddedPostgres, startEmbeddedPostgres } from '../storage/embedded-postgres.js';
import { openPglite, PGLITE_SUBDIR } from '../storage/pglite.js';
import { openPostgres } from '../storage/postgres.js';

const USAGE = `usage: npm run audit:verify -- <projectId | ${NO_PROJECT}> [--config <file>]`;

/** The project id argument: the first argument that is neither an option nor an option's value. */
function projectArgument(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--config') i++;
    else if (!a.startsWith('--')) return a;
  }
  return undefined;
}

/** Opens the configured database as the server would, without migrating it. */
async function openConfigured(config: Config): Promise<Db> {
  if (config.databaseUrl)
    return openPostgres(config.databaseUrl, { max: 2, connectTimeoutMs: config.databaseConnectTimeout });
  if (config.embeddedEngine === 'postgres' && hasEmbeddedPostgres(config.dataDir))
    return (await startEmbeddedPostgres(config.dataDir, { poolSize: 2 })).db;
  if (fs.existsSync(path.join(config.dataDir, PGLITE_SUBDIR, 'PG_VERSION')))
    return openPglite(config.dataDir);
  throw new Error(`no database in dataDir ${config.dataDir} (and no databaseUrl configured)`);
}

async function main(argv: readonly string[]): Promise<number> {
  const arg = projectArgument(argv);
  if (arg === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const config = loadConfig(argv, process.env);
  const db = await openConfigured(config);
  try {
    const result = await createAuditChain(db).verify(arg === NO_PROJECT ? '' : arg);
    process.stdout.write(`${JSON.stringify({ project: arg, ...result }, null, 2)}\n`);
    return result.valid ? 0 : 1;
  } finally {
    await db.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // PGlite throws plain objects; say what they hold rather than [object Object].
    const why =
      err instanceof Error ? err.message : typeof err === 'object' ? JSON.stringify(err) : String(err);
    process.stderr.write(`audit:verify failed: ${why}\n`);
    process.exit(2);
  },
);
