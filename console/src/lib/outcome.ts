// Error messages for people: an OperationOutcome's issues (diagnostics, else details.text, else the code), an OAuth
// error answer (RFC 6749 §5.2), or the HTTP status when the body says nothing.

export interface Issue {
  severity?: string;
  code?: string;
  diagnostics?: string;
  details?: { text?: string };
  expression?: string[];
}

/** What an issue says: `diagnostics`, else `details.text`, else its code. */
export const issueText = (i: Issue): string =>
  i.diagnostics ?? i.details?.text ?? i.code ?? 'Unknown problem';

/** One line per issue: `diagnostics` (or `details.text`, or the issue code), with its expression when it has one. */
export function outcomeMessages(body: unknown): string[] {
  const o = body as { resourceType?: string; issue?: Issue[] } | null;
  if (!o || o.resourceType !== 'OperationOutcome' || !Array.isArray(o.issue)) return [];
  return o.issue.map((i) => {
    const text = issueText(i);
    const where = i.expression?.length ? ` (at ${i.expression.join(', ')})` : '';
    return `${text}${where}`;
  });
}

/** The message of a failed answer: its OperationOutcome, its OAuth error, or its status. */
export function errorMessage(status: number, body: unknown): string {
  const lines = outcomeMessages(body);
  if (lines.length) return lines.join('\n');
  const oauth = body as { error?: unknown; error_description?: unknown } | null;
  if (oauth && typeof oauth.error === 'string') {
    return typeof oauth.error_description === 'string'
      ? `${oauth.error}: ${oauth.error_description}`
      : oauth.error;
  }
  if (status === 0) return 'The server could not be reached.';
  return `The server answered ${status}${STATUS_TEXT[status] ? ` ${STATUS_TEXT[status]}` : ''}.`;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  410: 'Gone',
  412: 'Precondition Failed',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};
