// Gatehouse console: small enhancements over pages that work without this file.
(() => {
  'use strict';

  // Destructive forms carry an "I am sure" box (the path without JavaScript). With JavaScript,
  // a confirmation dialog takes its place.
  for (const form of document.querySelectorAll('form.danger-zone')) {
    const box = form.querySelector('input[name="confirm"]');
    if (!box) continue;
    box.checked = true;
    box.closest('.field')?.setAttribute('hidden', '');
  }

  document.addEventListener('submit', (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    const question = form.dataset.confirm;
    if (question && !window.confirm(question)) {
      event.preventDefault();
      return;
    }
    // One submission at a time: the buttons are disabled once the browser has read the form.
    setTimeout(() => {
      for (const b of form.querySelectorAll('button[type="submit"]')) b.disabled = true;
    }, 0);
  });

  // On a narrow screen the sections scroll sideways: bring the current one into view.
  document.querySelector('nav.sections [aria-current="page"]')?.scrollIntoView({ block: 'nearest', inline: 'center' });

  // Filters that apply as soon as they change.
  for (const select of document.querySelectorAll('select[data-autosubmit]')) {
    select.addEventListener('change', () => select.form?.requestSubmit());
  }

  // Copy buttons for values shown once (client secrets).
  for (const button of document.querySelectorAll('button[data-copy]')) {
    const target = document.getElementById(button.dataset.copy ?? '');
    if (!target || !navigator.clipboard) continue;
    button.hidden = false;
    button.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(target.textContent ?? '');
        button.textContent = 'Copied';
      } catch {
        button.textContent = 'Copy failed: select the text';
      }
    });
  }

  // The draft form: a chosen file and the pasted text are both sent; say which files were picked.
  const files = document.getElementById('draft-files');
  if (files instanceof HTMLInputElement) {
    const hint = document.getElementById('draft-files-hint');
    const original = hint?.textContent ?? '';
    files.addEventListener('change', () => {
      if (!hint) return;
      const names = [...(files.files ?? [])].map((f) => f.name);
      hint.textContent = names.length ? `Chosen: ${names.join(', ')}. ${original}` : original;
    });
  }
})();
