// resource_history holds only the versions that are no longer current (issue 30): the current version is the row of
// `resources` (a deleted row as the deletion, without content), and a version moves to the history when the next one
// replaces it (store.ts writeVersion). Until now every version was written to both tables, so the history held a
// second copy of every current resource (1,393 bytes per resource of the Synthea load). The current row is
// authoritative: the history's copy of its version is deleted without comparing the two.
// The table keeps its file size after the delete (PostgreSQL reuses the free space for later history rows);
// `VACUUM (FULL) resource_history` returns it to the operating system (docs/incoming/bytes-rows.md).
export const version = 24;
export const sql = `
DELETE FROM resource_history h USING resources r WHERE h.rid = r.rid AND h.version_id = r.version_id;
`;
