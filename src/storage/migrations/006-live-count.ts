// Counting the live resources of a type (in a project): `$csv`'s X-Total-Count, `_total=accurate`, `_summary=count`.
// A partial index without deleted rows lets PostgreSQL count from the index alone (100,000 Patients: about 12 ms
// instead of a 100 ms table scan).
export const version = 6;
export const sql = `
CREATE INDEX resources_live_type_project ON resources (resource_type, project_id) WHERE NOT deleted;
`;
