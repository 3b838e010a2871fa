// The FHIRPath of one ViewDefinition element, compiled once with HL7's fhirpath engine (R4 model): constants
// substituted, the text parsed, every function and `%` variable checked before any resource is seen, so that a
// view that cannot run fails as a whole with 422 (API.md §7). https://hl7.org/fhirpath/ and
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#fhirpath-functionality
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { discardTrace } from '../search/fhirpath-options.js';
import { substituteConstants } from './constants.js';
import { viewError } from './view-definition.js';

/** The variables of one evaluation: `%rowIndex` (SQL on FHIR), `%resource` and `%rootResource` (FHIR). */
export interface Env {
  rowIndex: number;
  resource: unknown;
  rootResource: unknown;
}

/** Evaluates on a focus (the resource, or a node an earlier evaluation returned); items keep their FHIR types. */
export type Evaluator = (focus: unknown, env: Env) => unknown[];

export interface ExpressionContext {
  /** Constant name → FHIRPath literal. */
  literals: ReadonlyMap<string, string>;
  /** The engine's options: typed results, the view functions. */
  options: Record<string, unknown>;
}

// Variables that exist in every view evaluation: SQL on FHIR's %rowIndex, FHIR's %resource/%rootResource, and
// those of the engine itself (%context, %ucum, %factory).
const VARIABLES = new Set(['rowIndex', 'resource', 'rootResource', 'context', 'ucum', 'factory']);

interface AstNode {
  type: string;
  text?: string;
  children?: AstNode[];
}

const stripTicks = (s: string): string => (s.startsWith('`') && s.endsWith('`') ? s.slice(1, -1) : s);

function identifierOf(n: AstNode): string | undefined {
  if (n.type === 'Identifier') return n.text;
  for (const c of n.children ?? []) {
    const id = identifierOf(c);
    if (id !== undefined) return id;
  }
  return undefined;
}

/** Each function call (name as written, number of arguments) and each `%` variable of a parsed expression. */
function usesOf(ast: AstNode): { functions: [string, number][]; variables: string[] } {
  const functions: [string, number][] = [];
  const variables: string[] = [];
  const stack = [ast];
  while (stack.length > 0) {
    const n = stack.pop() as AstNode;
    if (n.type === 'Functn') {
      const name = n.children?.find((c) => c.type === 'Identifier')?.text;
      const params = n.children?.find((c) => c.type === 'ParamList')?.children?.length ?? 0;
      if (name !== undefined) functions.push([name, params]);
    } else if (n.type === 'ExternalConstantTerm') {
      const id = identifierOf(n);
      if (id !== undefined) variables.push(stripTicks(id));
    }
    for (const c of n.children ?? []) stack.push(c);
  }
  return { functions, variables };
}

// name/arity → why it cannot be called, or '' when it can; the answer depends only on the engine and viewFunctions.
const known = new Map<string, string>();

/**
 * Whether the engine knows `name` with `arity` arguments: a call on the empty collection tells it, as the engine
 * says "Not implemented" for an unknown function, "expects no params" for arguments to one that takes none, and writes
 * a warning for another wrong arity (caught here, so nothing a request wrote reaches the server's output).
 */
function functionProblem(name: string, arity: number, options: Record<string, unknown>): string {
  const key = `${name}/${arity}`;
  const cached = known.get(key);
  if (cached !== undefined) return cached;
  const args = Array.from({ length: arity }, () => '{}').join(', ');
  let problem = '';
  const warn = console.warn;
  console.warn = (msg: unknown) => {
    if (String(msg).includes('wrong arity'))
      problem = `${stripTicks(name)}() does not take ${arity} argument(s)`;
  };
  try {
    fhirpath.evaluate({}, `{}.${name}(${args})`, {}, r4, options as never);
  } catch (err) {
    const message = (err as Error).message ?? '';
    if (message.startsWith('Not implemented')) problem = `unknown function ${stripTicks(name)}()`;
    else if (message.endsWith('expects no params')) problem = `${stripTicks(name)}() takes no arguments`;
  } finally {
    console.warn = warn;
  }
  if (known.size > 1000) known.clear();
  known.set(key, problem);
  return problem;
}

/** Compiles the FHIRPath of `element`; throws a 422 naming the element when it does not parse or cannot run. */
export function compileExpression(expression: string, element: string, ctx: ExpressionContext): Evaluator {
  const text = substituteConstants(expression, ctx.literals);
  let ast: AstNode;
  try {
    ast = fhirpath.parse(text) as AstNode;
  } catch (err) {
    const why = ((err as Error).message ?? '').split('\n')[0]?.slice(0, 200) ?? '';
    throw viewError(`Invalid FHIRPath in ${element}: ${why}`, 'views.fhirpath-syntax', element);
  }
  const uses = usesOf(ast);
  for (const v of uses.variables)
    if (!VARIABLES.has(v))
      throw viewError(`Unknown variable %${v.slice(0, 64)} in ${element}`, 'views.unknown-variable', element);
  for (const [name, arity] of uses.functions) {
    const problem = functionProblem(name, arity, ctx.options);
    if (problem) throw viewError(`${problem.slice(0, 100)} in ${element}`, 'views.unknown-function', element);
  }
  const fn = fhirpath.compile(text, r4, ctx.options as never) as unknown as (
    data: unknown,
    env: Record<string, unknown>,
  ) => unknown[];
  return (focus, env) => fn(focus, env as unknown as Record<string, unknown>);
}

/** The JSON value of an item an evaluation returned (Date, DateTime and Time as their text). */
export function jsonValue(item: unknown): unknown {
  const v = (fhirpath.resolveInternalTypes([item]) as unknown[])[0];
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : String(v);
  return v;
}

/** The engine options of view evaluations with the given function table. */
export function engineOptions(userInvocationTable: Record<string, unknown>): Record<string, unknown> {
  return { resolveInternalTypes: false, userInvocationTable, traceFn: discardTrace };
}
