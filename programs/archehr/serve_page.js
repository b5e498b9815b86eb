// One source per request, as the API requires: while an XML file is chosen the text boxes are disabled (and say
// so), and "Clear the file" gives them back; the file never silently wins over text typed after it.
async function programBody() {
  const file = $('xml').files[0];
  // the file's bytes, not file.text(): that reads them as UTF-8 whatever the XML declares, and an ISO-8859-1
  // case came back with U+FFFD; the server decodes them by the declaration, as data.cases reads a file
  if (file) return {xml_base64: await new Promise((done, fail) => {
    const reader = new FileReader();
    reader.onload = () => done(String(reader.result).split(',', 2)[1] || '');
    reader.onerror = () => fail(reader.error);
    reader.readAsDataURL(file);
  })};
  return {patient_narrative: $('message').value, note: $('note').value};
}
function syncSource() {
  const file = $('xml').files[0];
  for (const id of ['message', 'note']) $(id).disabled = Boolean(file);
  $('clear-xml').hidden = !file;
  $('source').replaceChildren(...(file ? ['The case is read from the file ', text(file.name),
    ': the text boxes are not sent. Clear the file to type a case.'] : []));
}
$('xml').addEventListener('change', syncSource);
$('clear-xml').addEventListener('click', () => { $('xml').value = ''; syncSource(); $('message').focus(); });
syncSource();  // a file the browser kept across a reload
function programRender(d) {
  const out = el('section', {class: 'result'});
  out.append(el('h2', {}, 'Clinician question'), el('p', {id: 'question'}, d.clinician_question));
  const candidates = d.question_candidates || [];
  if (candidates.length) {  // what the learned stage weighed, the pick first (as report.html lists them)
    const list = el('ol', {});
    for (const c of candidates) {
      const why = c.eligible ? '' : '; excluded: ' + c.excluded;
      list.append(el('li', {}, c.question, ` (score ${Number(c.score).toFixed(2)}`, why, ')'));
    }
    const n = candidates.length;
    out.append(el('details', {class: 'candidates', id: 'candidates'},
      el('summary', {}, `${n} candidate question${n === 1 ? '' : 's'} the stage weighed`), list));
  }
  const evidence = new Set(d.evidence_ids || []);
  const scores = d.scores || {};
  const classOf = (id) => evidence.has(id) ? 'essential' : (scores[id] === 3 ? 'supplementary' : '');
  out.append(el('h2', {}, 'Answer'));
  const answer = el('div', {class: 'answer', id: 'answer'});
  const links = {};
  for (const a of d.alignment || []) links[a.answer_id] = a.evidence_id || [];
  const verdicts = {};
  for (const v of d.grounding || []) verdicts[v.answer_id] = v;
  const sentences = d.answer_sentences && d.answer_sentences.length ? d.answer_sentences : [{id: '1', text: d.answer || ''}];
  for (const a of sentences) {
    const v = verdicts[a.id];
    const flagged = v && v.verdict !== 'supported';
    const p = el('p', {class: flagged ? 'flagged' : ''}, a.text);
    for (const id of links[a.id] || []) p.append(cite(id));
    if (v) {
      p.append(el('span', {class: 'verdict ' + (flagged ? 'flagged' : 'supported')}, v.verdict));
      if (v.refill) p.append(el('span', {class: 'muted'}, ' quoted from the note (refill)'));
      if (flagged && (v.reasons || []).length)  // a reason may quote the note: each one its own text
        p.append(el('span', {class: 'muted'}, ' ', ...v.reasons.flatMap((r, i) => i ? ['; ', r] : [r])));
    }
    answer.append(p);
  }
  out.append(answer);
  out.append(el('h2', {}, 'Note'), el('p', {class: 'legend muted'},
    el('span', {class: 'essential'}, 'essential: selected as evidence'),
    el('span', {class: 'supplementary'}, 'supplementary: scored 3 of 5')));
  out.append(noteList(d.sentences || [], classOf));
  if (d.fallbacks && Object.keys(d.fallbacks).length)
    out.append(el('p', {class: 'muted'}, 'Fallbacks: ' + JSON.stringify(d.fallbacks)));
  if (d.lm_failure) out.append(el('p', {class: 'muted'}, 'LM failure (the non-LLM program answered): ' + d.lm_failure));
  return out;
}
