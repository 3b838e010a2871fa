// Planner statistics for the token index. PostgreSQL multiplies the selectivities of `resource_type`, `code`,
// `system` and `value` as if they were independent, while a value all but fixes the others (`8302-2` is always a
// LOINC `code` of an Observation). With a million Patients beside 100,000 Observations it estimated one row for
// `Observation?code=http://loinc.org|8302-2` (5,000 in truth), started `subject=…&code=…` from the code, and took
// 51 ms instead of 0.1 ms (bench/growth.ts). Functional-dependency statistics correct the product; ANALYZE
// (autovacuum's or the next one) fills them. An MCV list over the same columns is left out: it replaced the estimate
// of any combination missing from it by a near-zero one.
export const version = 15;
export const sql = `
CREATE STATISTICS sp_token_dependencies (dependencies) ON resource_type, code, system, value FROM sp_token;
`;
