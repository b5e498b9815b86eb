(function(){
  const boxes = Array.from(document.querySelectorAll('.filters input[type=checkbox]'));
  const cases = Array.from(document.querySelectorAll('.case'));
  const count = document.getElementById('shown-count');
  function apply(){
    const on = boxes.filter(b => b.checked).map(b => b.dataset.filter);
    let shown = 0;
    cases.forEach(c => {
      const keep = on.every(f => c.dataset[f] === '1');
      c.hidden = !keep; if (keep) shown++;
    });
    if (count) count.textContent = shown + ' of ' + cases.length + ' shown';
  }
  boxes.forEach(b => b.addEventListener('change', apply));
  apply();
})();
