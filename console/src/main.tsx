// The console's entry point: renders the app into #app with the URLs of the server that serves it.
import { render } from 'preact';
import { App } from './app.js';
import { envFrom } from './lib/env.js';
import './style.css';

render(<App env={envFrom(location.href)} />, document.getElementById('app') as HTMLElement);
