// The one error type of Cinder and the single issue-code → HTTP status table.
// https://hl7.org/fhir/R4/operationoutcome.html and https://hl7.org/fhir/R4/valueset-issue-type.html

export type IssueSeverity = 'fatal' | 'error' | 'warning' | 'information';

export type IssueCode =
  | 'invalid'
  | 'structure'
  | 'required'
  | 'value'
  | 'invariant'
  | 'security'
  | 'login'
  | 'forbidden'
  | 'processing'
  | 'not-supported'
  | 'duplicate'
  | 'not-found'
  | 'deleted'
  | 'too-long'
  | 'conflict'
  | 'exception'
  | 'timeout'
  | 'throttled'
  | 'transient'
  | 'informational'
  | 'too-costly'
  | 'business-rule'
  | 'incomplete'
  | 'multiple-matches';

export interface OperationOutcomeIssue {
  severity: IssueSeverity;
  code: IssueCode;
  details?: { text: string };
  diagnostics?: string;
  expression?: string[];
}

export interface OperationOutcome {
  resourceType: 'OperationOutcome';
  id?: string;
  issue: OperationOutcomeIssue[];
}

/** Default HTTP status per issue code; a throw site may override with an explicit status (e.g. 405, 413, 415). */
const STATUS_BY_CODE: Record<IssueCode, number> = {
  invalid: 400,
  structure: 400,
  required: 400,
  value: 400,
  invariant: 400,
  'business-rule': 400,
  processing: 400,
  'not-supported': 400,
  incomplete: 400,
  'too-long': 413,
  security: 401,
  login: 401,
  forbidden: 403,
  'not-found': 404,
  deleted: 410,
  duplicate: 409,
  'multiple-matches': 412,
  conflict: 409,
  'too-costly': 422,
  throttled: 429,
  exception: 500,
  transient: 503,
  timeout: 504,
  informational: 200,
};

export function statusForCode(code: IssueCode): number {
  return STATUS_BY_CODE[code];
}

/**
 * The single error type. `code` is a stable machine id unique to each throw site (e.g. `rest.read.gone`),
 * handy in logs and tests; `status` defaults from the issue code.
 */
export class FhirError extends Error {
  readonly status: number;
  readonly issues: OperationOutcomeIssue[];
  readonly headers: Record<string, string>;

  constructor(
    readonly issueCode: IssueCode,
    message: string,
    readonly code: string,
    opts: {
      status?: number;
      expression?: string[];
      issues?: OperationOutcomeIssue[];
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = 'FhirError';
    this.status = opts.status ?? statusForCode(issueCode);
    this.headers = opts.headers ?? {};
    this.issues = opts.issues ?? [
      {
        severity: 'error',
        code: issueCode,
        details: { text: message },
        ...(opts.expression ? { expression: opts.expression } : {}),
      },
    ];
  }

  toOutcome(): OperationOutcome {
    return { resourceType: 'OperationOutcome', issue: this.issues };
  }
}

export function outcome(severity: IssueSeverity, code: IssueCode, text: string): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: [{ severity, code, details: { text } }] };
}

export const notFound = (what: string, code = 'rest.not-found'): FhirError =>
  new FhirError('not-found', `Not found: ${what}`, code);
