// SQL on FHIR v2 ViewDefinitions (API.md §7): compile a view once, run it over resources, write its rows as CSV,
// NDJSON or a JSON array. https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html
export { compileView, type CompiledView, type CompileOptions, type Row } from './compile.js';
export type { ViewColumnInfo } from './columns.js';
export type { NumberText } from './functions.js';
export { readViewDefinition, type ViewDefinition } from './view-definition.js';
export { cellText, csvHeader, csvRow, ndjsonLine, rowsToCsv, rowsToJson, rowsToNdjson } from './output.js';
