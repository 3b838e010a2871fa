// `_sort=-date` walks the date index from the latest end: a resource sorts descending at the greatest `high` of its
// date values, which sp_date_value (low first) cannot give in order. Issue 30, src/fhir/search/sql.ts sortWalkSql.
export const version = 26;
export const sql = `
CREATE INDEX sp_date_high ON sp_date (resource_type, code, high, rid);
`;
