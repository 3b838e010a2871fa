// The job queue behind AsyncJob (API.md §5). The AsyncJob resource (in `resources`) is what clients read; this row
// is the worker's state machine: lease (claimed with FOR UPDATE SKIP LOCKED), heartbeat, attempts, checkpoint.
// Both are changed together and conditionally (`WHERE state = 'accepted'`), so a final state is never overwritten.
// `cancel_requested` stays true on a cancelled job until its partial files are deleted.
export const version = 5;
export const sql = `
CREATE TABLE jobs (
  id text PRIMARY KEY,
  kind text NOT NULL,
  params jsonb NOT NULL,
  project_id text NOT NULL,
  owner text,
  state text NOT NULL DEFAULT 'accepted',
  lease_owner text,
  lease_until timestamptz,
  heartbeat timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  progress text,
  checkpoint jsonb,
  cancel_requested boolean NOT NULL DEFAULT false,
  error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_claimable ON jobs (created_at) WHERE state = 'accepted' OR cancel_requested;
`;
