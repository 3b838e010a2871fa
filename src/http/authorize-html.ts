// The pages of the browser authorization endpoint (RFC 6749 §4.1.1, SMART App Launch 2.x standalone launch,
// https://hl7.org/fhir/smart-app-launch/app-launch.html): sign-in, membership chooser, patient picker and error
// pages, server-rendered HTML without scripts. Every value that reaches a page goes through `esc`.
import type { MembershipOption } from '../auth/authorize-login.js';
import type { PatientOption } from '../auth/patient-picker.js';

/** HTML text and attribute escaping (the five characters that can end a text node or a quoted attribute). */
export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;line-height:1.5}
label{display:block;margin-top:1rem}input{display:block;width:100%;padding:.5rem;box-sizing:border-box}
button{margin-top:1.25rem;padding:.5rem 1rem}.error{color:#a00;border-left:4px solid #a00;padding-left:.75rem}
fieldset{border:0;padding:0}legend{font-weight:600}input[type=radio]{display:inline;width:auto}`;

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${esc(title)}</title><style>${STYLE}</style></head>
<body><main>
${body}
</main></body>
</html>
`;
}

const errorBlock = (message: string | undefined): string =>
  message ? `<p class="error" role="alert" id="form-error">${esc(message)}</p>` : '';

export interface SignInPage {
  action: string;
  transaction: string;
  clientName: string;
  email?: string;
  error?: string;
  /** The label of the application's identity provider, when it has one (a "Sign in with" button). */
  provider?: string;
}

export function signInPage(p: SignInPage): string {
  const described = p.error ? ' aria-describedby="form-error"' : '';
  return page(
    'Sign in',
    `<h1>Sign in</h1>
<p><strong>${esc(p.clientName)}</strong> asks to use your account.</p>
${errorBlock(p.error)}
<form method="post" action="${esc(p.action)}">
<input type="hidden" name="transaction" value="${esc(p.transaction)}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${esc(p.email ?? '')}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${described}>
<button type="submit">Sign in</button>
<button type="submit" name="cancel" value="1" formnovalidate>Cancel</button>
</form>${
      p.provider
        ? `
<form method="post" action="${esc(p.action)}">
<input type="hidden" name="transaction" value="${esc(p.transaction)}">
<button type="submit" name="provider" value="1">Sign in with ${esc(p.provider)}</button>
</form>`
        : ''
    }`,
  );
}

export interface ChooserPage {
  action: string;
  transaction: string;
  options: MembershipOption[];
  error?: string;
}

export function chooserPage(p: ChooserPage): string {
  const items = p.options
    .map(
      (o, i) =>
        `<label><input type="radio" name="membership" value="${esc(o.id)}"${i === 0 ? ' checked' : ''}> ${esc(o.label)}</label>`,
    )
    .join('\n');
  return page(
    'Choose a project',
    `<h1>Choose a project</h1>
${errorBlock(p.error)}
<form method="post" action="${esc(p.action)}">
<input type="hidden" name="transaction" value="${esc(p.transaction)}">
<fieldset><legend>Sign in as</legend>
${items}
</fieldset>
<button type="submit">Continue</button>
<button type="submit" name="cancel" value="1">Cancel</button>
</form>`,
  );
}

export interface PatientPickerPage {
  action: string;
  transaction: string;
  patients: PatientOption[];
  search: string;
  error?: string;
}

/** The patient picker of a standalone `launch/patient` (API.md §11): a name search and the patients it found. */
export function patientPickerPage(p: PatientPickerPage): string {
  const items = p.patients
    .map(
      (o, i) =>
        `<label><input type="radio" name="patient" value="${esc(o.id)}"${i === 0 ? ' checked' : ''}> ${esc(o.label)}</label>`,
    )
    .join('\n');
  const list = p.patients.length
    ? `<form method="post" action="${esc(p.action)}">
<input type="hidden" name="transaction" value="${esc(p.transaction)}">
<input type="hidden" name="search" value="${esc(p.search)}">
<fieldset><legend>Patients</legend>
${items}
</fieldset>
<button type="submit" id="choose-patient">Continue with this patient</button>
<button type="submit" name="cancel" value="1">Cancel</button>
</form>`
    : `<p id="no-patients">No patient found${p.search ? ` for “${esc(p.search)}”` : ''}.</p>`;
  return page(
    'Choose a patient',
    `<h1>Choose a patient</h1>
<p>The application asks for one patient's record.</p>
${errorBlock(p.error)}
<form method="post" action="${esc(p.action)}" role="search">
<input type="hidden" name="transaction" value="${esc(p.transaction)}">
<label for="search">Name</label>
<input id="search" name="search" type="search" value="${esc(p.search)}">
<button type="submit" name="find" value="1">Search</button>
</form>
${list}`,
  );
}

export function errorPage(message: string): string {
  return page(
    'Sign-in error',
    `<h1>This sign-in cannot continue</h1>
${errorBlock(message)}
<p>Return to the application and start again.</p>`,
  );
}
