// `_sort=-date` walks the date index from the latest end: a resource sorts descending at the greatest `high` of its
// date values, ties by rid ascending, which sp_date_value (low first) cannot give in order. In that order exactly
// (high descending, rid ascending), so a page is the index's first rows with no sort at all, and a `previous` page
// the same range read backwards. Issue 30, src/fhir/search/sql.ts sortWalkSql.
export const version = 26;
export const sql = `
CREATE INDEX sp_date_high ON sp_date (resource_type, code, high DESC, rid);
`;
