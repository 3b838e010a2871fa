// The page query of a bulk export (https://hl7.org/fhir/uv/bulkdata/export.html): one type's rows in rid order,
// within the caller's project, `_since`, the R4 Patient compartment at Patient and Group level
// (https://hl7.org/fhir/R4/compartmentdefinition-patient.html: a row is in a Patient's compartment when one of the
// search parameters the definition names for its type references that Patient, as the sp_reference index holds it),
// and the type's `_typeFilter` queries OR'ed, each matched by the search machinery itself (src/fhir/search/sql.ts).
import { structureNode } from '../../fhir/definitions/index.js';
import { patientCompartment } from '../../fhir/definitions/patient-compartment.js';
import { parseTypeFilter } from '../../fhir/operations/export-params.js';
import { referencedBy } from '../../fhir/search/patient-reach.js';
import { withNarrower } from '../../fhir/search/reference-pairs.js';
import { contentJson, matchCondition } from '../../fhir/search/sql.js';
import type { ExportParams } from './export.js';

export interface PageQuery {
  text: string;
  values: unknown[];
}

/** The compartment condition on row `r` of `type`, or undefined at system level. */
function compartmentCondition(
  p: ExportParams,
  type: string,
  bind: (v: unknown) => string,
): string | undefined {
  // Every Patient is in its own compartment.
  if (p.level === 'system' || (type === 'Patient' && p.patients === undefined)) return undefined;
  // With the narrower codes that hold some of their rows (Observation `patient` for `subject`: reference-pairs.ts).
  const codes = withNarrower(type, patientCompartment().get(type) ?? []);
  if (codes.length === 0 && type !== 'Patient') return 'FALSE';
  // Every Patient (Patient level): each row is checked by its rid as the pages walk the type. Some Patients (a Group,
  // or `patient`): their references as the reference index holds them (type, param, `Patient/id`), so that PostgreSQL
  // may start from those of a small group instead of walking every row of the type to find them (a row by row check
  // read all ten million reference rows for a Group of one: about 1 s a page, now 1-3 ms). For a larger group it
  // still walks the type's rows in order from the page's start, with theirs beside it.
  const refs =
    codes.length === 0
      ? 'FALSE'
      : p.patients === undefined
        ? `EXISTS (SELECT 1 FROM sp_reference s WHERE s.rid = r.rid AND s.code = ANY(${bind(codes)}::text[]) ` +
          `AND s.ref LIKE 'Patient/%')`
        : // `x.rid > $2` (the page's start, as `r.rid > $2`): a walk of the reference rows by rid starts there too.
          referencedBy(
            'r',
            '$1',
            codes,
            p.patients.map((id) => `Patient/${id}`),
            bind,
            ' AND x.rid > $2::bigint',
          );
  // A Patient is in its own compartment (and, through `link`, in the compartments of the Patients it links to).
  return type === 'Patient' ? `(r.id = ANY(${bind(p.patients)}::text[]) OR ${refs})` : refs;
}

/**
 * A page of AuditEvents (API.md §10), which live in their own table: in insertion order (`seq` stands for the rid),
 * the project's, `_since` on `recorded`, at Patient and Group level those with a patient entity of the Patients.
 * `_typeFilter` does not apply to them (the kick-off leaves such a filter out with a warning).
 */
function auditPageQuery(
  p: ExportParams,
  after: number,
  limit: number,
  omit: readonly string[] | undefined,
): PageQuery {
  const values: unknown[] = [after, limit];
  const bind = (v: unknown): string => `$${values.push(v)}`;
  const conds = ['a.seq > $1::bigint'];
  if (p.projectId !== null) conds.push(`a.project_id = ${bind(p.projectId)}`);
  if (p.since !== null) conds.push(`a.recorded > ${bind(p.since)}::timestamptz`);
  if (p.level !== 'system')
    conds.push(
      p.patients === undefined
        ? "a.patients <> '{}'"
        : `a.patients && ${bind(p.patients.map((id) => `Patient/${id}`))}::text[]`,
    );
  return {
    text: `SELECT r.rid, ${contentJson('r', omit, bind)} AS json FROM (
      SELECT a.seq AS rid, a.content::json AS content FROM audit_events a WHERE ${conds.join(' AND ')}
      ORDER BY a.seq LIMIT $2) r ORDER BY r.rid`,
    values,
  };
}

export function pageQuery(
  p: ExportParams,
  type: string,
  after: number,
  limit: number,
  omit: readonly string[] | undefined,
): PageQuery {
  if (type === 'AuditEvent') return auditPageQuery(p, after, limit, omit);
  const values: unknown[] = [type, after, limit];
  const bind = (v: unknown): string => `$${values.push(v)}`;
  const conds = ['r.resource_type = $1', 'NOT r.deleted', 'r.rid > $2::bigint'];
  if (p.projectId !== null) conds.push(`r.project_id = ${bind(p.projectId)}`);
  if (p.since !== null) conds.push(`r.last_updated > ${bind(p.since)}::timestamptz`);
  const compartment = compartmentCondition(p, type, bind);
  if (compartment) conds.push(compartment);
  const filters = p.typeFilters?.[type];
  if (filters && filters.length > 0) {
    const scope = { projectId: p.projectId };
    const matches = filters.map((q) => `(${matchCondition(parseTypeFilter(type, q), scope, bind)})`);
    conds.push(`(${matches.join(' OR ')})`);
  }
  return {
    text: `SELECT r.rid, ${contentJson('r', omit, bind)} AS json FROM resources r WHERE ${conds.join(' AND ')} ORDER BY r.rid LIMIT $3`,
    values,
  };
}

/**
 * `_elements` of `type`: the listed elements that apply to it plus its mandatory ones (min ≥ 1 in the R4 definition;
 * id, meta and resourceType are always kept by applyElements), or undefined when none is listed for it.
 */
export function elementsOf(p: ExportParams, type: string): string[] | undefined {
  if (!p.elements) return undefined;
  const listed = [...p.elements.all, ...(p.elements.byType[type] ?? [])];
  if (listed.length === 0) return undefined;
  const required = (structureNode(type)?.required ?? []).map((r) => r.element.name);
  return [...new Set([...listed, ...required])];
}
