const cfg = JSON.parse(document.getElementById('config').textContent);
const $ = (id) => document.getElementById(id);
// Every text child is set as text inside its own <bdi>: a note sentence, a question or an id holding U+202E (a
// right-to-left override) or U+2067 cannot reorder the page's own words after it ("(essential)" shown as
// "(laitnesse)", a citation's [3] as ]3[). So echoed text goes in as its own child, never pasted into a label.
function text(value) {
  const node = document.createElement('bdi');
  node.textContent = String(value ?? '');
  return node;
}
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : text(c));
  return node;
}
function status(text, cls) { const s = $('status'); s.className = cls || ''; s.textContent = text; }
async function run() {
  $('result').replaceChildren();
  const button = $('run');
  button.disabled = true;
  const started = Date.now();
  status('Running… 0 s', 'running');
  const timer = setInterval(() => status(`Running… ${Math.round((Date.now() - started) / 1000)} s`, 'running'), 500);
  try {
    const headers = {'Content-Type': 'application/json'};
    if (cfg.needs_token) headers['Authorization'] = 'Bearer ' + $('token').value;
    const response = await fetch(cfg.path, {method: 'POST', headers, body: JSON.stringify(await programBody())});
    let data = null;
    try { data = await response.json(); }
    catch (e) { data = {error: `the server answered HTTP ${response.status} without JSON`}; }
    clearInterval(timer);
    if (!response.ok || data.error) {
      status('');
      $('result').replaceChildren(el('div', {class: 'refusal', role: 'alert'},
        `Refused (HTTP ${response.status}): `, data.error || JSON.stringify(data)));
      return;
    }
    status(`Done in ${data.seconds == null ? '?' : Number(data.seconds).toFixed(2)} s.`);
    $('result').replaceChildren(programRender(data));
  } catch (e) {
    clearInterval(timer);
    status('');
    $('result').replaceChildren(el('div', {class: 'refusal', role: 'alert'}, 'Could not reach the server: ', e));
  } finally { button.disabled = false; }
}
function noteList(sentences, classOf) {
  const list = el('ol', {class: 'note'});
  for (const s of sentences) {
    const cls = classOf(s.id);
    const item = el('li', {id: 's-' + s.id, class: cls, 'data-id': s.id}, el('span', {class: 'sid'}, '[', s.id, ']'), s.text);
    if (cls) item.append(el('span', {class: 'muted'}, ` (${cls})`));
    list.append(item);
  }
  return list;
}
function cite(id) {
  const link = el('a', {class: 'cite', href: '#s-' + id}, '[', id, ']');
  link.addEventListener('click', () => {
    document.querySelectorAll('li.target').forEach((n) => n.classList.remove('target'));
    const target = document.getElementById('s-' + id);
    if (target) target.classList.add('target');
  });
  return link;
}
$('run').addEventListener('click', run);
