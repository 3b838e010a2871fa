// Placeholder replaced by the search module's index tables.
export const version = 2;
export const sql = `SELECT 1;`;
