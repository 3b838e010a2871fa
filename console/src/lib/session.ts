// Where the console keeps its login: the tokens in sessionStorage only (one tab's life, never localStorage), and
// while a sign-in is under way its PKCE verifier and state, removed as soon as the code is exchanged.

export interface Session {
  accessToken: string;
  refreshToken?: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

export interface PendingSignIn {
  state: string;
  verifier: string;
  /** The console path to return to after signing in, e.g. `jobs`. */
  returnTo: string;
}

const SESSION = 'cinder.console.session';
const PENDING = 'cinder.console.pending';

type Store = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

function read<T>(store: Store, key: string): T | undefined {
  try {
    const text = store.getItem(key);
    return text ? (JSON.parse(text) as T) : undefined;
  } catch {
    return undefined;
  }
}

export const loadSession = (store: Store = sessionStorage): Session | undefined =>
  read<Session>(store, SESSION);
export const saveSession = (s: Session, store: Store = sessionStorage): void =>
  store.setItem(SESSION, JSON.stringify(s));
export const clearSession = (store: Store = sessionStorage): void => store.removeItem(SESSION);

export const loadPending = (store: Store = sessionStorage): PendingSignIn | undefined =>
  read<PendingSignIn>(store, PENDING);
export const savePending = (p: PendingSignIn, store: Store = sessionStorage): void =>
  store.setItem(PENDING, JSON.stringify(p));
export const clearPending = (store: Store = sessionStorage): void => store.removeItem(PENDING);
