async function programBody() { return {note: $('note').value}; }
function programRender(d) {
  const out = el('section', {class: 'result'});
  const flagged = Number(d.flag) === 1;
  out.append(el('h2', {}, flagged ? 'An error was found' : 'No error found'));
  if (flagged) {
    out.append(el('p', {id: 'flagged'}, `Sentence ${d.sentence_id}: `, el('strong', {}, d.correction)));
  }
  out.append(el('p', {class: 'muted'}, 'Submission line: ', d.line, ' · outcome: ', d.outcome));
  if (d.lm_failure) out.append(el('p', {class: 'refusal', id: 'lm-failure'},
    'The LM failed, so this is the documented fallback (no error flagged): ', d.lm_failure));
  out.append(noteList(d.sentences || [], (id) => flagged && String(id) === String(d.sentence_id) ? 'essential' : ''));
  const trace = el('details', {}, el('summary', {}, `Agent trace (${(d.episodes || []).length} episodes)`),
    el('pre', {}, JSON.stringify(d.episodes || [], null, 2)));
  out.append(trace);
  return out;
}
