// llamaserve's chat page. Model output never reaches the DOM as markup: it
// is set as textContent of elements built here (the Markdown renderer below
// builds elements, never HTML strings), and the page's Content-Security-Policy
// forbids inline script besides.
'use strict';

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// ---- storage -------------------------------------------------------------

const KEY_CONVS = 'llamaserve.conversations';
const KEY_CURRENT = 'llamaserve.current';
const KEY_SETTINGS = 'llamaserve.settings';
const KEY_APIKEY = 'llamaserve.apikey';

function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v === null ? fallback : v;
  } catch { return fallback; }
}

function store(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
    return true;
  } catch (e) {
    // The quota (about 5 MB): the conversation lives on in this tab.
    note('Not saved in the browser: ' + e.message);
    return false;
  }
}

const state = {
  convs: load(KEY_CONVS, []),
  current: load(KEY_CURRENT, null),
  settings: Object.assign({ markdown: true, top_logprobs: '5' }, load(KEY_SETTINGS, {})),
  apiKey: localStorage.getItem(KEY_APIKEY) || '',
  props: null,
  busy: null, // the AbortController of the request in progress
};

function saveConvs() {
  store(KEY_CONVS, state.convs);
  store(KEY_CURRENT, state.current);
}

function conv() {
  return state.convs.find((c) => c.id === state.current) || null;
}

function newConv() {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), title: 'New chat', created: new Date().toISOString(), messages: [] };
  state.convs.unshift(c);
  state.current = c.id;
  saveConvs();
  return c;
}

// ---- API -------------------------------------------------------------------

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (state.apiKey) h.Authorization = 'Bearer ' + state.apiKey;
  return h;
}

// api fetches path; a 401 asks for the API key and tries again.
async function api(path, init) {
  for (;;) {
    const resp = await fetch(path, Object.assign({}, init, { headers: headers() }));
    if (resp.status !== 401) return resp;
    const key = await ask('API key', 'This server needs its API key (llamaserve --api-key). It is kept in this browser.', '', 'password');
    if (key === null) return resp;
    state.apiKey = key;
    localStorage.setItem(KEY_APIKEY, key);
  }
}

async function errorText(resp) {
  try {
    const j = await resp.json();
    if (j && j.error && j.error.message) return `${resp.status}: ${j.error.message}`;
  } catch { /* not JSON */ }
  return `HTTP ${resp.status}`;
}

async function loadProps() {
  try {
    const resp = await api('/props');
    if (!resp.ok) { note('Server defaults unavailable: ' + await errorText(resp)); return; }
    state.props = await resp.json();
    $('model').textContent = `${state.props.model} · ${state.props.n_ctx} tokens`;
  } catch (e) { note('Server unreachable: ' + e.message); }
}

// The fields of the settings form, by request field; each maps one to one.
const numberFields = ['temperature', 'top_p', 'top_k', 'min_p', 'typical_p', 'repetition_penalty',
  'presence_penalty', 'frequency_penalty', 'seed', 'max_tokens', 'mirostat', 'mirostat_tau', 'mirostat_eta'];
const intFields = new Set(['top_k', 'seed', 'max_tokens', 'mirostat']);

function requestBody(messages) {
  const s = state.settings;
  const body = { model: state.props ? state.props.model : undefined, messages: [], stream: true, stream_options: { include_usage: true } };
  if (s.system && s.system.trim()) body.messages.push({ role: 'system', content: s.system });
  for (const m of messages) body.messages.push({ role: m.role, content: m.content });
  for (const f of numberFields) {
    if (s[f] === undefined || s[f] === '') continue;
    body[f] = intFields.has(f) ? parseInt(s[f], 10) : parseFloat(s[f]);
  }
  const top = s.top_logprobs === '' || s.top_logprobs === undefined ? 5 : parseInt(s.top_logprobs, 10);
  body.logprobs = true;
  body.top_logprobs = top;
  const stops = (s.stop || '').split('\n').filter((x) => x !== '');
  if (stops.length) body.stop = stops;
  if (s.format === 'json_object') body.response_format = { type: 'json_object' };
  if (s.format === 'json_schema') body.response_format = { type: 'json_schema', json_schema: { name: 'page', schema: JSON.parse(s.schema) } };
  if (s.format === 'grammar' && s.grammar && s.grammar.trim()) body.grammar = s.grammar;
  return body;
}

// ---- streaming -------------------------------------------------------------

// readEvents yields the data of each server-sent event of resp.
// The body is cancelled when the reader stops early (stop, an error event):
// the browser then closes the connection, and the server frees the slot.
async function* readEvents(resp, signal) {
  const reader = resp.body.getReader();
  const cancel = () => reader.cancel().catch(() => {});
  signal.addEventListener('abort', cancel, { once: true });
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        if (line.startsWith('data:')) yield line.slice(5).trim();
      }
    }
  } finally {
    signal.removeEventListener('abort', cancel);
    cancel();
  }
}

async function generate() {
  const c = conv();
  const reply = { role: 'assistant', content: '', tokens: [], reasoning: '', meta: { state: 'running' } };
  c.messages.push(reply);
  const view = renderMessage(reply, c.messages.length - 1, true);
  const ctl = new AbortController();
  setBusy(ctl);
  const t0 = performance.now();
  let tFirst = 0, tLast = 0, n = 0;
  let body;
  try {
    body = JSON.stringify(requestBody(c.messages.slice(0, -1)));
  } catch (e) {
    reply.meta = { state: 'error', error: 'Settings: ' + e.message };
    finish(view, reply);
    return;
  }
  try {
    const resp = await api('/v1/chat/completions', { method: 'POST', body, signal: ctl.signal });
    if (!resp.ok) throw new Error(await errorText(resp));
    for await (const data of readEvents(resp, ctl.signal)) {
      if (data === '[DONE]') break;
      const ev = JSON.parse(data);
      if (ev.error) throw new Error(ev.error.message || 'stream error');
      if (ev.usage) reply.meta.usage = ev.usage;
      const ch = ev.choices && ev.choices[0];
      if (!ch) continue;
      const d = ch.delta || {};
      if (typeof d.reasoning_content === 'string' && d.reasoning_content) {
        reply.reasoning += d.reasoning_content;
        view.reasoning(reply.reasoning);
      }
      const lps = ch.logprobs && ch.logprobs.content;
      let added = [];
      if (Array.isArray(lps) && lps.length) {
        added = lps.map((t) => ({ t: t.token, lp: t.logprob, top: (t.top_logprobs || []).map((a) => [a.token, a.logprob]) }));
      } else if (typeof d.content === 'string' && d.content) {
        added = [{ t: d.content }];
      }
      if (typeof d.content === 'string') reply.content += d.content;
      if (added.length) {
        const now = performance.now();
        if (!tFirst) tFirst = now;
        tLast = now;
        n += added.length;
        reply.tokens.push(...added);
        view.append(added, reply);
      }
      if (ch.finish_reason) reply.meta.finish = ch.finish_reason;
    }
    if (ctl.signal.aborted) throw ctl.signal.reason;
    reply.meta.state = 'done';
  } catch (e) {
    if (ctl.signal.aborted) {
      reply.meta.state = 'stopped';
      reply.meta.finish = 'stopped';
    } else {
      reply.meta.state = 'error';
      reply.meta.error = e.message;
    }
  }
  if (tFirst) {
    reply.meta.ttft = tFirst - t0;
    reply.meta.tokens = reply.meta.usage ? reply.meta.usage.completion_tokens : n;
    reply.meta.tps = n > 1 && tLast > tFirst ? (n - 1) / ((tLast - tFirst) / 1000) : null;
  }
  finish(view, reply);
}

function finish(view, reply) {
  setBusy(null);
  view.done(reply);
  saveConvs();
}

function setBusy(ctl) {
  state.busy = ctl;
  $('send').hidden = !!ctl;
  $('stop').hidden = !ctl;
  document.body.classList.toggle('busy', !!ctl);
  for (const b of document.querySelectorAll('.msg .who button')) b.disabled = !!ctl;
}

// ---- rendering ---------------------------------------------------------------

function probClass(lp) {
  if (lp === undefined || lp === null) return 'p0';
  const p = Math.exp(lp);
  if (p >= 0.9) return 'p0';
  if (p >= 0.6) return 'p1';
  if (p >= 0.3) return 'p2';
  if (p >= 0.1) return 'p3';
  return 'p4';
}

const pct = (lp) => (100 * Math.exp(lp)).toFixed(lp > Math.log(0.001) ? 1 : 3) + '%';
const show = (t) => JSON.stringify(t); // a token as a quoted string: spaces and newlines visible

function tokenSpan(tok, i) {
  const s = el('span', 'tok ' + probClass(tok.lp), tok.t);
  s.dataset.i = i;
  if (tok.lp !== undefined) {
    const alts = (tok.top || []).map(([t, lp]) => `${show(t)} ${pct(lp)}`).join(', ');
    s.title = `${show(tok.t)} ${pct(tok.lp)}` + (alts ? ` — top: ${alts}` : '');
  }
  return s;
}

function renderTokens(body, tokens, from) {
  for (let i = from; i < tokens.length; i++) body.append(tokenSpan(tokens[i], i));
}

function metaText(m) {
  if (!m) return '';
  if (m.state === 'running') return '…';
  const parts = [];
  if (m.finish) parts.push('finish: ' + m.finish);
  if (m.tokens !== undefined) parts.push(m.tokens + ' tokens');
  if (m.tps) parts.push(m.tps.toFixed(1) + ' tokens/s');
  if (m.ttft !== undefined) parts.push('first token ' + Math.round(m.ttft) + ' ms');
  if (m.error) parts.push('error: ' + m.error);
  return parts.join(' · ');
}

// renderMessage appends message i to the log; for a reply it returns the
// view that streaming updates.
function renderMessage(m, i, streaming) {
  const box = el('div', 'msg ' + m.role);
  box.dataset.i = i;
  const who = el('div', 'who');
  who.append(el('span', '', m.role === 'user' ? 'You' : 'Model'));
  box.append(who);
  const reasoning = el('details', 'reasoning');
  reasoning.hidden = !m.reasoning;
  const rtext = el('div', '', m.reasoning || '');
  reasoning.append(el('summary', '', 'Reasoning'), rtext);
  if (m.role === 'assistant') box.append(reasoning);
  const body = el('div', 'body');
  box.append(body);
  const meta = el('div', 'meta');
  if (m.role === 'assistant') box.append(meta);
  $('log').append(box);

  let asTokens = m.role === 'assistant' && !state.settings.markdown;
  const fill = () => {
    body.replaceChildren();
    body.classList.toggle('tokens', asTokens);
    if (m.role !== 'assistant') body.textContent = m.content;
    else if (asTokens) renderTokens(body, m.tokens || [], 0);
    else renderMarkdown(body, m.content);
  };
  fill();
  if (m.role === 'assistant') {
    meta.textContent = metaText(m.meta);
    meta.classList.toggle('error', !!(m.meta && m.meta.error));
    const toggle = el('button', 'view', asTokens ? 'Markdown' : 'Probabilities');
    toggle.type = 'button';
    toggle.title = 'Switch between Markdown and the tokens coloured by probability';
    toggle.addEventListener('click', () => {
      asTokens = !asTokens;
      toggle.textContent = asTokens ? 'Markdown' : 'Probabilities';
      fill();
    });
    who.append(toggle);
  }
  addActions(who, m, i);
  if (!streaming) return null;

  const log = $('log');
  let pending = 0;
  return {
    append(added, reply) {
      const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      if (asTokens) renderTokens(body, reply.tokens, reply.tokens.length - added.length);
      else if (!pending) {
        // Markdown is rendered again once a frame, not once a token.
        pending = requestAnimationFrame(() => { pending = 0; renderMarkdown(body, reply.content); });
      }
      if (stick) log.scrollTop = log.scrollHeight;
    },
    reasoning(text) { reasoning.hidden = false; rtext.textContent = text; },
    done(reply) {
      if (pending) cancelAnimationFrame(pending);
      fill();
      meta.textContent = metaText(reply.meta);
      meta.classList.toggle('error', !!reply.meta.error);
      renderLog(); // the actions move to the new last messages
    },
  };
}

function addActions(who, m, i) {
  const c = conv();
  const last = c.messages.length - 1;
  const button = (label, cls, fn) => {
    const b = el('button', cls, label);
    b.type = 'button';
    b.disabled = !!state.busy;
    b.addEventListener('click', fn);
    who.append(b);
  };
  if (m.role === 'assistant' && i === last) button('Regenerate', 'regenerate', regenerate);
  const lastUser = c.messages.map((x) => x.role).lastIndexOf('user');
  if (m.role === 'user' && i === lastUser) button('Edit', 'edit', editLast);
}

function renderLog() {
  const log = $('log');
  log.replaceChildren();
  const c = conv();
  $('title').textContent = c ? c.title : 'llamaserve';
  if (!c) return;
  c.messages.forEach((m, i) => renderMessage(m, i, false));
  log.scrollTop = log.scrollHeight;
}

function renderConvs() {
  const ul = $('convs');
  ul.replaceChildren();
  for (const c of state.convs) {
    const li = el('li', c.id === state.current ? 'current' : '');
    const open = el('button', 'open', c.title);
    open.type = 'button';
    open.title = c.title;
    if (c.id === state.current) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => {
      if (state.busy) return;
      state.current = c.id;
      saveConvs();
      renderConvs();
      renderLog();
      $('side').classList.remove('open');
      $('input').focus();
    });
    const rename = el('button', 'small rename', '✎');
    rename.type = 'button';
    rename.title = rename.ariaLabel = 'Rename ' + c.title;
    rename.addEventListener('click', async () => {
      const t = await ask('Rename', '', c.title);
      if (t === null || !t.trim()) return;
      c.title = t.trim();
      saveConvs();
      renderConvs();
      renderLog();
    });
    const del = el('button', 'small delete', '✕');
    del.type = 'button';
    del.title = del.ariaLabel = 'Delete ' + c.title;
    del.addEventListener('click', async () => {
      if (state.busy && c.id === state.current) return;
      if (await ask('Delete', `Delete the conversation “${c.title}”?`, null) === null) return;
      state.convs = state.convs.filter((x) => x !== c);
      if (state.current === c.id) state.current = state.convs.length ? state.convs[0].id : null;
      saveConvs();
      renderConvs();
      renderLog();
    });
    li.append(open, rename, del);
    ul.append(li);
  }
}

// ---- Markdown ----------------------------------------------------------------

// renderMarkdown fills parent with the Markdown of text: paragraphs, headings,
// fenced code (with a copy button), lists, block quotes, rules, and inline
// code, emphasis and links. Every piece of text becomes a text node.
function renderMarkdown(parent, text) {
  parent.replaceChildren();
  const lines = text.split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) {
      const p = el('p');
      inline(p, para.join('\n'));
      parent.append(p);
      para = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
    if (fence) {
      flush();
      const code = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
      i++;
      const pre = el('pre');
      const c = el('code', fence[2] ? 'lang-' + fence[2] : '', code.join('\n'));
      const copy = el('button', 'copy', 'Copy');
      copy.type = 'button';
      copy.addEventListener('click', () => copyText(c.textContent, copy));
      pre.append(copy, c);
      parent.append(pre);
      continue;
    }
    let m;
    if ((m = line.match(/^(#{1,6})\s+(.*)$/))) {
      flush();
      const h = el('h' + Math.min(6, m[1].length + 2));
      inline(h, m[2]);
      parent.append(h);
    } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      parent.append(el('hr'));
    } else if (/^\s*>/.test(line)) {
      flush();
      const q = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) q.push(lines[i++].replace(/^\s*>\s?/, ''));
      const bq = el('blockquote');
      renderMarkdown(bq, q.join('\n'));
      parent.append(bq);
      continue;
    } else if ((m = line.match(/^\s*([-*+]|\d+[.)])\s+/))) {
      flush();
      const ordered = /\d/.test(m[1]);
      const list = el(ordered ? 'ol' : 'ul');
      while (i < lines.length && (m = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/)) && /\d/.test(m[1]) === ordered) {
        const li = el('li');
        inline(li, m[2]);
        list.append(li);
        i++;
      }
      parent.append(list);
      continue;
    } else if (!line.trim()) {
      flush();
    } else {
      para.push(line);
    }
    i++;
  }
  flush();
}

// inline appends text with its inline Markdown to parent.
function inline(parent, text) {
  const re = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    if (m[1]) parent.append(el('code', '', m[2]));
    else if (m[3] || m[4]) { const b = el('strong'); inline(b, m[3] || m[4]); parent.append(b); }
    else if (m[5]) { const e = el('em'); inline(e, m[5]); parent.append(e); }
    else if (m[6]) {
      const a = el('a', '', m[6]);
      a.href = m[7]; // only http(s): the pattern admits no other scheme
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      parent.append(a);
    }
    last = re.lastIndex;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed';
  }
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

// ---- token details -------------------------------------------------------------

function showTokInfo(span) {
  const box = $('tokinfo');
  const m = span.closest('.msg');
  const c = conv();
  if (!m || !c) return;
  const msg = c.messages[+m.dataset.i];
  const tok = msg && msg.tokens && msg.tokens[+span.dataset.i];
  if (!tok || tok.lp === undefined) { box.hidden = true; return; }
  box.replaceChildren();
  const table = el('table');
  const row = (t, lp, chosen) => {
    const tr = el('tr', chosen ? 'chosen' : '');
    tr.append(el('td', '', show(t)), el('td', '', pct(lp)));
    table.append(tr);
  };
  row(tok.t, tok.lp, true);
  for (const [t, lp] of tok.top || []) if (t !== tok.t) row(t, lp, false);
  box.append(el('div', 'muted', 'chosen token, then the top alternatives'), table);
  box.hidden = false;
  const r = span.getBoundingClientRect();
  const w = box.offsetWidth, h = box.offsetHeight;
  box.style.left = Math.max(4, Math.min(r.left, innerWidth - w - 4)) + 'px';
  box.style.top = (r.bottom + h + 4 < innerHeight ? r.bottom + 4 : Math.max(4, r.top - h - 4)) + 'px';
  for (const s of document.querySelectorAll('.tok.sel')) s.classList.remove('sel');
  span.classList.add('sel');
}

function hideTokInfo() {
  $('tokinfo').hidden = true;
  for (const s of document.querySelectorAll('.tok.sel')) s.classList.remove('sel');
}

function wireTokens() {
  const log = $('log');
  log.addEventListener('mouseover', (e) => { if (e.target.classList.contains('tok')) showTokInfo(e.target); });
  log.addEventListener('mouseout', (e) => { if (e.target.classList.contains('tok')) hideTokInfo(); });
  // A tap shows a token's details, a tap elsewhere hides them.
  document.addEventListener('click', (e) => { if (e.target.classList.contains('tok')) showTokInfo(e.target); else hideTokInfo(); });
  // Keyboard: a token view is one tab stop; the arrow keys walk its tokens.
  log.addEventListener('focusin', (e) => {
    if (e.target.classList.contains('tokens')) {
      const first = e.target.querySelector('.tok.sel') || e.target.querySelector('.tok');
      if (first) showTokInfo(first);
    }
  });
  log.addEventListener('focusout', (e) => { if (e.target.classList.contains('tokens')) hideTokInfo(); });
  log.addEventListener('keydown', (e) => {
    if (!e.target.classList.contains('tokens')) return;
    const cur = e.target.querySelector('.tok.sel');
    let next = null;
    if (e.key === 'ArrowRight') next = cur ? cur.nextElementSibling : e.target.firstElementChild;
    else if (e.key === 'ArrowLeft') next = cur ? cur.previousElementSibling : null;
    else if (e.key === 'Escape') { hideTokInfo(); return; }
    if (next) { e.preventDefault(); showTokInfo(next); next.scrollIntoView({ block: 'nearest' }); }
  });
  // Token views become focusable as they appear.
  new MutationObserver(() => {
    for (const b of document.querySelectorAll('.body.tokens:not([tabindex])')) {
      b.tabIndex = 0;
      b.setAttribute('aria-label', 'Reply tokens: arrow keys show each token\u2019s probability and alternatives');
    }
  }).observe(log, { childList: true, subtree: true, attributes: true, attributeFilter: ['class'] });
}

// ---- dialogs -------------------------------------------------------------------

// ask shows a dialog with text and, unless value is null, an input; it
// resolves to the input's value (or '' without one), or null when cancelled.
function ask(title, text, value, type) {
  const d = $('ask');
  $('ask-title').textContent = title;
  $('ask-text').textContent = text || '';
  const input = $('ask-input');
  input.hidden = value === null;
  input.type = type || 'text';
  input.value = value || '';
  d.returnValue = '';
  d.showModal();
  if (value !== null) input.select();
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok' ? (value === null ? '' : input.value) : null), { once: true });
  });
}

function note(text) {
  const n = el('div', 'msg meta error', text);
  $('log').append(n);
}

function openSettings() {
  const f = $('settings-form');
  const s = state.settings;
  const base = (state.props && state.props.default_generation_settings) || {};
  for (const e of f.elements) {
    if (!e.name) continue;
    if (e.type === 'checkbox') e.checked = !!s[e.name];
    else if (e.name === 'apikey') e.value = state.apiKey;
    else e.value = s[e.name] === undefined ? '' : s[e.name];
    const d = base[e.name];
    if ('placeholder' in e && d !== undefined && d !== null && e.tagName !== 'SELECT') e.placeholder = Array.isArray(d) ? d.join('\n') : String(d);
  }
  $('settings-error').textContent = '';
  $('settings').showModal();
}

function saveSettings() {
  const f = $('settings-form');
  const s = {};
  for (const e of f.elements) {
    if (!e.name) continue;
    if (e.type === 'checkbox') s[e.name] = e.checked;
    else if (e.name !== 'apikey') s[e.name] = e.value;
  }
  if (s.format === 'json_schema') {
    try { JSON.parse(s.schema); } catch (err) { $('settings-error').textContent = 'The JSON Schema is not JSON: ' + err.message; return false; }
  }
  state.settings = s;
  store(KEY_SETTINGS, s);
  state.apiKey = f.elements.apikey.value;
  if (state.apiKey) localStorage.setItem(KEY_APIKEY, state.apiKey);
  else localStorage.removeItem(KEY_APIKEY);
  renderLog();
  return true;
}

// ---- actions ---------------------------------------------------------------------

function send(text) {
  text = text.replace(/^\n+|\n+$/g, ''); // blank lines around a message are a stray Enter's
  if (state.busy || !text.trim()) return;
  const c = conv() || newConv();
  if (!c.messages.length && c.title === 'New chat') c.title = text.trim().slice(0, 40);
  c.messages.push({ role: 'user', content: text });
  saveConvs();
  renderConvs();
  renderLog();
  generate();
}

function regenerate() {
  const c = conv();
  if (state.busy || !c || !c.messages.length || c.messages[c.messages.length - 1].role !== 'assistant') return;
  c.messages.pop();
  renderLog();
  generate();
}

function editLast() {
  const c = conv();
  if (state.busy || !c) return;
  const i = c.messages.map((x) => x.role).lastIndexOf('user');
  if (i < 0) return;
  $('input').value = c.messages[i].content;
  c.messages.splice(i);
  saveConvs();
  renderLog();
  $('input').focus();
}

function exportConv() {
  const c = conv();
  if (!c) return;
  const blob = new Blob([JSON.stringify(c, null, 2)], { type: 'application/json' });
  const a = el('a');
  a.href = URL.createObjectURL(blob);
  a.download = (c.title.replace(/[^\w.-]+/g, '_') || 'chat') + '.json';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function init() {
  wireTokens();
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('input').value;
    if (!t.trim() || state.busy) return;
    $('input').value = '';
    send(t);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); $('composer').requestSubmit(); }
  });
  $('stop').addEventListener('click', () => { if (state.busy) state.busy.abort(); });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && state.busy && !document.querySelector('dialog[open]')) state.busy.abort(); });
  $('new-chat').addEventListener('click', () => {
    if (state.busy) return;
    newConv();
    renderConvs();
    renderLog();
    $('side').classList.remove('open');
    $('input').focus();
  });
  $('export').addEventListener('click', exportConv);
  $('toggle-side').addEventListener('click', () => {
    const open = $('side').classList.toggle('open');
    $('toggle-side').setAttribute('aria-expanded', String(open));
    if (open) $('new-chat').focus();
  });
  $('open-settings').addEventListener('click', openSettings);
  $('settings-form').addEventListener('submit', (e) => {
    if (e.submitter && e.submitter.value === 'save' && !saveSettings()) e.preventDefault();
  });
  $('settings-reset').addEventListener('click', () => {
    for (const e of $('settings-form').elements) {
      if (e.name && numberFields.concat(['top_logprobs', 'stop']).includes(e.name)) e.value = '';
    }
  });
  renderConvs();
  renderLog();
  loadProps();
  $('input').focus();
}

init();
