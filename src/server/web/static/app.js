/*
 * Fountain's chat habits in the browser, written by hand (no build step) and progressive: every page
 * works without it. Enter sends (Shift+Enter: a new line), the conversation follows new events unless
 * the reader scrolled up (then a "New messages" pill), a waiting permission request shows in the tab's
 * title and, when asked for, as a notification while the tab is hidden; copy buttons on code, commands
 * and tool output; times in the reader's own zone, relative ("2 min ago"), exact on hover; images pasted,
 * dropped or picked into the message box.
 */
(() => {
  'use strict';

  // Enter sends the message box's form; Shift+Enter (or an IME composition) keeps the newline.
  document.addEventListener('keydown', (e) => {
    const box = e.target;
    if (!(box instanceof HTMLTextAreaElement) || !box.hasAttribute('data-enter-sends')) return;
    if (e.key !== 'Enter' || e.shiftKey || e.altKey || e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    if (box.value.trim() === '' || !box.form) return;
    box.form.requestSubmit();
  });

  // Images in the message box: pasted, dropped or picked, checked as the server checks them (the type by
  // the first bytes, the size, the count), each shown as a chip holding its hidden `image` field (a data
  // URL), so the form posts them with the text, url-encoded like every form here.
  const IMAGE_MAGIC = [
    ['image/png', (b) => b.length >= 8 && [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((v, i) => b[i] === v)],
    ['image/jpeg', (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
    ['image/gif', (b) => b.length >= 6 && /^GIF8[79]a$/.test(String.fromCharCode(...b.subarray(0, 6)))],
    [
      'image/webp',
      (b) =>
        b.length >= 12 &&
        String.fromCharCode(...b.subarray(0, 4)) === 'RIFF' &&
        String.fromCharCode(...b.subarray(8, 12)) === 'WEBP',
    ],
  ];
  const sniff = (bytes) => IMAGE_MAGIC.find(([, test]) => test(bytes))?.[0] ?? null;
  const sizeWords = (n) =>
    n < 1024 ? `${n} bytes` : n < 1048576 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1048576).toFixed(1)} MB`;
  const readAs = (file, how) =>
    new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      if (how === 'url') r.readAsDataURL(file);
      else r.readAsArrayBuffer(file);
    });
  // Reads still under way per form: a send waits for them (Enter right after a paste).
  const reading = new WeakMap();
  function imageBox(form) {
    const chips = form.querySelector('#prompt-images');
    const note = form.querySelector('#image-note');
    const max = Number(form.dataset.maxImages) || 10;
    const maxBytes = Number(form.dataset.maxImageBytes) || 10 * 1048576;
    const count = () => chips.querySelectorAll('li').length;
    const say = (words) => {
      note.textContent = words.join(' ');
      note.hidden = words.length === 0;
    };
    const clear = () => {
      for (const img of chips.querySelectorAll('img')) URL.revokeObjectURL(img.src);
      chips.replaceChildren();
      chips.hidden = true;
      say([]);
    };
    async function add(files) {
      const refused = [];
      let pending = reading.get(form) ?? Promise.resolve();
      for (const file of files) {
        const name = file.name || 'The pasted image';
        // Counted with the reads still under way, so a burst of pastes cannot pass the limit.
        if (count() + (chips.dataset.adding ? Number(chips.dataset.adding) : 0) >= max) {
          refused.push(`${name} was not added: at most ${max} images go with one message.`);
          continue;
        }
        if (file.size > maxBytes) {
          refused.push(`${name} is ${sizeWords(file.size)}: each image may be at most ${sizeWords(maxBytes)}.`);
          continue;
        }
        chips.dataset.adding = String(Number(chips.dataset.adding ?? 0) + 1);
        const one = (async () => {
          try {
            const type = sniff(new Uint8Array(await readAs(file.slice(0, 16), 'buffer')));
            if (!type) {
              refused.push(`${name} is not an image this box takes: send PNG, JPEG, GIF or WebP.`);
              return;
            }
            const url = await readAs(file, 'url');
            // The type the bytes say, whatever the file claimed (the server checks the same).
            const data = `data:${type};base64,${url.slice(url.indexOf(',') + 1)}`;
            const li = document.createElement('li');
            li.className = 'image-chip';
            const thumb = document.createElement('img');
            thumb.src = URL.createObjectURL(file);
            thumb.alt = '';
            const label = document.createElement('span');
            label.className = 'small';
            label.textContent = `${name} · ${sizeWords(file.size)}`;
            const field = document.createElement('input');
            field.type = 'hidden';
            field.name = 'image';
            field.value = data;
            const remove = document.createElement('button');
            remove.type = 'button';
            remove.className = 'secondary small-button';
            remove.textContent = '×';
            remove.setAttribute('aria-label', `Remove ${name}`);
            remove.addEventListener('click', () => {
              URL.revokeObjectURL(thumb.src);
              li.remove();
              chips.hidden = count() === 0;
              form.querySelector('textarea')?.focus();
            });
            li.append(thumb, label, field, remove);
            chips.append(li);
            chips.hidden = false;
          } catch {
            refused.push(`${name} could not be read; add it again.`);
          } finally {
            chips.dataset.adding = String(Number(chips.dataset.adding) - 1);
          }
        })();
        pending = pending.then(() => one);
      }
      const done = pending.then(() => say(refused));
      reading.set(form, done);
      await done;
      if (reading.get(form) === done) reading.delete(form);
    }
    return { add, clear };
  }
  const imageForm = document.querySelector('form[data-images]');
  if (imageForm && 'FileReader' in window) {
    const box = imageBox(imageForm);
    imageForm.querySelector('#add-images')?.removeAttribute('hidden');
    imageForm.querySelector('[data-image-hint]')?.removeAttribute('hidden');
    const picker = imageForm.querySelector('#add-images input[type="file"]');
    picker?.addEventListener('change', () => {
      const files = [...picker.files];
      picker.value = '';
      box.add(files);
    });
    imageForm.addEventListener('paste', (e) => {
      const files = [...(e.clipboardData?.files ?? [])];
      if (files.length === 0) return;
      // Text copied with a picture (from a document) still pastes as text; a picture alone goes to the chips.
      if (!e.clipboardData.types.includes('text/plain')) e.preventDefault();
      box.add(files);
    });
    const hasFiles = (e) => [...(e.dataTransfer?.types ?? [])].includes('Files');
    imageForm.addEventListener('dragover', (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = 'copy';
      imageForm.classList.add('dropping');
    });
    imageForm.addEventListener('dragleave', (e) => {
      if (!imageForm.contains(e.relatedTarget)) imageForm.classList.remove('dropping');
    });
    imageForm.addEventListener('drop', (e) => {
      imageForm.classList.remove('dropping');
      if (!hasFiles(e)) return;
      e.preventDefault();
      box.add([...e.dataTransfer.files]);
    });
    // A send while images are still being read waits for them, then goes (captured before htmx sees it).
    document.addEventListener(
      'submit',
      (e) => {
        const waitFor = reading.get(e.target);
        if (e.target !== imageForm || !waitFor) return;
        e.preventDefault();
        e.stopImmediatePropagation();
        waitFor.then(() => imageForm.requestSubmit());
      },
      true,
    );
    // Sent: the chips go with the text the form's own handler clears; refused, they stay to send again.
    document.body.addEventListener('htmx:afterRequest', (e) => {
      if (e.detail.elt !== imageForm || !e.detail.successful) return;
      if (!imageForm.querySelector('#prompt-result .error')) box.clear();
    });
  }

  // Relative times: "just now", "2 min ago", "3 hours ago", "in 5 min"; older than a week, the date.
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  function relative(date, now) {
    const s = Math.round((now - date.getTime()) / 1000);
    const a = Math.abs(s);
    const say = (words) => (s >= 0 ? `${words} ago` : `in ${words}`);
    if (a < 45) return s >= 0 ? 'just now' : 'in a moment';
    if (a < 3600) return say(`${Math.max(1, Math.round(a / 60))} min`);
    if (a < 86400) return say(plural(Math.round(a / 3600), 'hour'));
    if (a < 7 * 86400) return say(plural(Math.round(a / 86400), 'day'));
    const sameYear = date.getFullYear() === new Date(now).getFullYear();
    return date.toLocaleDateString(undefined, {
      day: 'numeric',
      month: 'short',
      year: sameYear ? undefined : 'numeric',
    });
  }
  function localTimes(root) {
    const now = Date.now();
    for (const el of root.querySelectorAll('time[data-relative][datetime]')) {
      const date = new Date(el.getAttribute('datetime'));
      if (Number.isNaN(date.getTime())) continue;
      const text = relative(date, now);
      if (el.textContent !== text) el.textContent = text;
      const exact = date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
      if (el.title !== exact) el.title = exact;
    }
  }

  // Copy buttons: on code blocks an agent wrote, a tool's command and its output.
  const COPYABLE = '.md pre, pre.cmd, pre.out, pre.copyable';
  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // No clipboard API (an insecure origin): the old way, through a selection.
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'fixed';
      area.style.opacity = '0';
      document.body.append(area);
      area.select();
      const ok = document.execCommand('copy');
      area.remove();
      return ok;
    }
  }
  function copyButtons(root) {
    for (const pre of root.querySelectorAll(COPYABLE)) {
      if (pre.parentElement?.classList.contains('copy-wrap')) continue;
      const wrap = document.createElement('div');
      wrap.className = 'copy-wrap';
      pre.replaceWith(wrap);
      wrap.append(pre);
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'copy secondary';
      button.textContent = 'Copy';
      button.setAttribute('aria-label', pre.classList.contains('cmd') ? 'Copy command' : 'Copy');
      button.addEventListener('click', async () => {
        let text = pre.textContent ?? '';
        if (pre.classList.contains('cmd')) text = text.replace(/^\$ /, '');
        const ok = await copy(text);
        button.textContent = ok ? 'Copied' : 'Copy failed';
        setTimeout(() => {
          button.textContent = 'Copy';
        }, 1500);
      });
      wrap.append(button);
    }
  }

  // The conversation: follow new events while the reader is at the end; otherwise offer a way back.
  const events = document.getElementById('events');
  const pill = document.getElementById('new-messages');
  let following = true;
  const atEnd = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
  const toEnd = () => {
    window.scrollTo({ top: document.documentElement.scrollHeight, behavior: 'instant' });
    following = true;
    if (pill) pill.hidden = true;
  };
  if (events) {
    window.addEventListener(
      'scroll',
      () => {
        following = atEnd();
        if (following && pill) pill.hidden = true;
      },
      { passive: true },
    );
    pill?.addEventListener('click', toEnd);
    new MutationObserver(() => {
      if (following) toEnd();
      else if (pill) pill.hidden = false;
    }).observe(events, { childList: true, subtree: true, characterData: true });
    if (!location.hash) toEnd();
  }

  // A permission request waiting: the tab's title says so; a notification too, if the reader asked for one.
  const WAITING_PREFIX = 'Waiting for your approval · ';
  const baseTitle = document.title.startsWith(WAITING_PREFIX)
    ? document.title.slice(WAITING_PREFIX.length)
    : document.title;
  const NOTIFY_KEY = 'fountain.notify';
  const canNotify = 'Notification' in window;
  const notifyOn = () =>
    canNotify && Notification.permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === 'on';
  let wasWaiting = null;
  function waiting() {
    const status = document.getElementById('conv-status');
    if (!status) return;
    const now = status.dataset.waiting === 'true';
    const title = (now ? WAITING_PREFIX : '') + baseTitle;
    if (document.title !== title) document.title = title;
    if (now && wasWaiting === false && document.hidden && notifyOn()) {
      const heading = document.querySelector('.conv-heading')?.textContent ?? 'A conversation';
      const n = new Notification('Waiting for your approval', { body: heading, tag: location.pathname });
      n.addEventListener('click', () => {
        window.focus();
        n.close();
      });
    }
    wasWaiting = now;
  }
  const notifyButton = document.getElementById('notify-toggle');
  function showNotify() {
    if (!notifyButton) return;
    notifyButton.hidden = !canNotify;
    const on = notifyOn();
    notifyButton.textContent = on ? 'Notifications on' : 'Notify me when it needs me';
    notifyButton.setAttribute('aria-pressed', on ? 'true' : 'false');
  }
  notifyButton?.addEventListener('click', async () => {
    if (notifyOn()) localStorage.setItem(NOTIFY_KEY, 'off');
    else if ((await Notification.requestPermission()) === 'granted') localStorage.setItem(NOTIFY_KEY, 'on');
    showNotify();
  });

  // The header's links behind "Menu" on a phone.
  const menu = document.querySelector('header.top .menu-toggle');
  if (menu) {
    const header = menu.closest('header');
    header.classList.add('has-menu');
    menu.hidden = false;
    menu.addEventListener('click', () => {
      const open = header.classList.toggle('menu-open');
      menu.setAttribute('aria-expanded', open ? 'true' : 'false');
    });
  }

  // The agent form: the model follows the runtime (its default, its examples), and a missing model
  // credential is said before saving.
  const modelData = document.getElementById('runtime-models');
  const runtimeSelect = document.getElementById('runtime');
  const modelInput = document.getElementById('model');
  if (modelData && runtimeSelect && modelInput) {
    const data = JSON.parse(modelData.textContent);
    const hint = document.getElementById('model_hint');
    const warning = document.getElementById('credential_warning');
    const vendorOf = (m) => m.slice(0, Math.max(0, m.indexOf('/')));
    const check = () => {
      const r = data.runtimes[runtimeSelect.value];
      if (!warning || !r) return;
      const needs = r.needs[vendorOf(modelInput.value.trim())] ?? [];
      const missing = needs.length > 0 && !needs.some((c) => data.set.includes(c));
      warning.hidden = !missing;
      const words = warning.querySelector('.credential-words');
      if (words) words.textContent = missing ? `No ${needs.map((c) => data.labels[c]).join(' or ')} is set: ` : '';
    };
    let previous = runtimeSelect.value;
    runtimeSelect.addEventListener('change', () => {
      const before = data.runtimes[previous];
      const r = data.runtimes[runtimeSelect.value];
      previous = runtimeSelect.value;
      if (!r) return;
      const m = modelInput.value.trim();
      if (m === '' || m === before?.default || !r.vendors.includes(vendorOf(m))) modelInput.value = r.default;
      if (hint)
        hint.textContent =
          r.vendors.length === 1 && r.vendors[0] === 'fountain'
            ? 'The demo runtime needs no model: fountain/demo.'
            : `provider/model, e.g. ${r.examples.join(', ')}.`;
      check();
    });
    modelInput.addEventListener('input', check);
  }

  let queued = false;
  function enhance() {
    queued = false;
    localTimes(document);
    copyButtons(document);
    waiting();
  }
  const later = () => {
    if (queued) return;
    queued = true;
    // Not requestAnimationFrame: a hidden tab gets no frames, and that is when a notification matters.
    setTimeout(enhance, 16);
  };
  document.addEventListener('DOMContentLoaded', () => {
    enhance();
    showNotify();
    new MutationObserver(later).observe(document.body, { childList: true, subtree: true });
    setInterval(() => localTimes(document), 30_000);
  });
})();
