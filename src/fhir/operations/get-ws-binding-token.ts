// GET|POST {fhir}/Subscription/<id>/$get-ws-binding-token (API.md §8 "Websocket";
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/OperationDefinition-backport-subscription-get-ws-binding-token.html):
// a short-lived token that binds a websocket to a Subscription the caller may read.
import type { Queryable } from '../../storage/db.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import { readLiveRow } from '../repository/read.js';
import type { FhirResult } from '../result.js';
import type { BindingTokens } from '../subscriptions/binding-token.js';
import type { OperationDefinition } from './operation.js';

/** What the operation needs from the server: its token signer and the websocket URL clients connect to. */
export interface WsBindingEnv {
  tokens: BindingTokens;
  /** `ws://…/ws/subscriptions-r4` or `wss://…` (binding-token.ts websocketUrl). */
  url: string;
}

export async function getWsBindingToken(
  env: WsBindingEnv,
  db: Queryable,
  ctx: RepoContext,
  id: string,
): Promise<FhirResult> {
  // The read's own rules: 403 without a read scope, 404 for another project's (or an unknown) Subscription, 410.
  const row = await readLiveRow(db, ctx, 'Subscription', id);
  const channel = (JSON.parse(row.json) as { channel?: { type?: unknown } }).channel?.type;
  if (channel !== 'websocket') {
    throw new FhirError(
      'invalid',
      `Subscription/${id} has channel type ${typeof channel === 'string' ? channel.slice(0, 32) : '(none)'}: a binding token is only for websocket subscriptions`,
      'subscription.ws-binding.channel',
    );
  }
  const caller = ctx.author ?? ctx.actor.membershipId ?? '';
  const { token, expiration } = await env.tokens.issue(
    {
      subscriptionId: row.id,
      projectId: row.project_id,
      caller,
      ...(ctx.actor.membershipId ? { membershipId: ctx.actor.membershipId } : {}),
    },
    ctx.clock(),
  );
  return {
    status: 200,
    body: {
      resourceType: 'Parameters',
      parameter: [
        { name: 'token', valueString: token },
        { name: 'expiration', valueDateTime: expiration.toISOString() },
        // The IG's `subscription` is a string, "the subscriptions this token is valid for": the id, as asked for.
        { name: 'subscription', valueString: row.id },
        { name: 'websocket-url', valueUrl: env.url },
      ],
    },
  };
}

export const getWsBindingTokenOperation: OperationDefinition = {
  code: 'get-ws-binding-token',
  level: 'instance',
  types: ['Subscription'],
  affectsState: false,
  definition:
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-get-ws-binding-token',
  run: (env, i) => getWsBindingToken(env.wsBinding, env.db, i.ctx, i.id),
};
