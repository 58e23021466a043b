// The review inbox page of `verdict up` (docs/review.md).
//
// Rules this file keeps: every value from the API reaches the page through
// textContent (never innerHTML), so a state holding markup shows as text;
// the API key lives in this script's memory only and travels only in the
// X-Api-Key header (never in a URL, a cookie or storage); no inline event
// handlers (the page's Content-Security-Policy forbids them anyway).
(function () {
  'use strict';

  // PAGE_SIZE is how many reviews a page lists: 20, or ?limit=N in the
  // page's address (1 to 200, the API's bound).
  var PAGE_SIZE = (function () {
    var n = Number(new URLSearchParams(window.location.search).get('limit'));
    return Number.isInteger(n) && n >= 1 && n <= 200 ? n : 20;
  }());

  var apiKey = ''; // the reviewer's key, in memory only
  var nextCursor = ''; // the cursor of the next page, "" when none
  var loading = false;
  var shown = new Set(); // request_id + "\n" + decision_id of listed cards

  function byId(id) { return document.getElementById(id); }

  var keySection = byId('key-section');
  var keyForm = byId('key-form');
  var keyInput = byId('api-key');
  var keyError = byId('key-error');
  var inbox = byId('inbox');
  var cards = byId('cards');
  var count = byId('count');
  var status = byId('status');
  var more = byId('more');
  var cardTemplate = byId('card-template');
  var optionTemplate = byId('option-template');

  // api calls the front door with the key and reads its JSON answer.
  // Paths are relative to the page, so a prefix in front of `verdict up`
  // keeps working.
  function api(method, path, body) {
    var init = {
      method: method,
      headers: { 'X-Api-Key': apiKey, 'Accept': 'application/json' },
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer'
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        return { status: resp.status, body: data, requestId: resp.headers.get('X-Request-Id') || '' };
      });
    }, function (err) {
      return { status: 0, body: { message: 'network error: ' + (err && err.message ? err.message : String(err)) }, requestId: '' };
    });
  }

  // errorText is an error answer as one line of text: its message, the
  // fields of a 422, and the request_id to quote to an operator.
  function errorText(res) {
    var b = res.body && typeof res.body === 'object' ? res.body : {};
    var text = typeof b.message === 'string' && b.message ? b.message : 'HTTP ' + res.status;
    if (Array.isArray(b.fields)) {
      b.fields.forEach(function (f) {
        if (f && typeof f === 'object') { text += '; ' + String(f.path) + ': ' + String(f.message); }
      });
    }
    var rid = typeof b.request_id === 'string' && b.request_id ? b.request_id : res.requestId;
    if (rid) { text += ' (request_id ' + rid + ')'; }
    return text;
  }

  function setStatus(text) { status.textContent = text; }

  function showKeyPrompt(message) {
    apiKey = '';
    nextCursor = '';
    shown.clear();
    cards.replaceChildren();
    inbox.hidden = true;
    keySection.hidden = false;
    keyError.textContent = message || '';
    keyError.hidden = !message;
    keyInput.focus();
  }

  function updateCount() {
    var n = cards.children.length;
    count.textContent = '(' + n + ' shown' + (nextCursor ? ', more to load' : '') + ')';
    if (n === 0 && !nextCursor && !loading) { setStatus('The inbox is empty.'); }
  }

  function percent(p) {
    var v = typeof p === 'number' && isFinite(p) ? Math.min(Math.max(p, 0), 1) : null;
    return v;
  }

  function stateText(state) {
    if (typeof state === 'string') { return state; }
    if (state === undefined || state === null) { return ''; }
    try { return JSON.stringify(state, null, 2); } catch (e) { return String(state); }
  }

  function text(s) { return typeof s === 'string' ? s : (s === undefined || s === null ? '' : String(s)); }

  // card builds one review's card from the templates, with textContent
  // for every value.
  function card(r) {
    var li = cardTemplate.content.firstElementChild.cloneNode(true);
    li.dataset.requestId = text(r.request_id);
    li.dataset.decisionId = text(r.decision_id);
    var question = text(r.question);
    li.querySelector('.question').textContent = question;
    li.setAttribute('aria-label', 'Review: ' + question);
    li.querySelector('.kind').textContent = r.kind ? 'kind ' + text(r.kind) + ' ·' : '';
    li.querySelector('.ids').textContent = 'decision ' + text(r.decision_id) + ' of request ' + text(r.request_id);
    var submitted = li.querySelector('.submitted');
    if (r.submitted_at) {
      submitted.textContent = '· submitted ' + text(r.submitted_at);
      submitted.setAttribute('datetime', text(r.submitted_at));
    }
    li.querySelector('.state').textContent = stateText(r.state);
    li.querySelector('.reason-text').textContent = r.reason ? text(r.reason) : '(none given)';

    var group = li.querySelector('.options');
    group.setAttribute('aria-label', 'Options for: ' + question);
    var options = Array.isArray(r.options) ? r.options : [];
    options.forEach(function (o, i) {
      var b = optionTemplate.content.firstElementChild.cloneNode(true);
      var id = text(o && o.id);
      b.dataset.option = id;
      b.querySelector('.shortcut').textContent = i < 9 ? String(i + 1) : '';
      if (i >= 9) { b.querySelector('.shortcut').hidden = true; }
      b.querySelector('.option-id').textContent = id;
      b.querySelector('.desc').textContent = text(o && o.description);
      var p = percent(o && o.probability);
      b.querySelector('.fill').style.width = p === null ? '0%' : (p * 100).toFixed(1) + '%';
      b.querySelector('.pct').textContent = p === null ? '–' : (p * 100).toFixed(1) + '%';
      if (r.chosen && r.chosen === id) {
        b.classList.add('chosen');
        b.querySelector('.chosen-mark').hidden = false;
      }
      b.addEventListener('click', function () { answer(li, id); });
      group.appendChild(b);
    });
    return li;
  }

  // load lists the next page of the inbox (the first when reset).
  function load(reset) {
    if (loading) { return Promise.resolve(); }
    if (reset) {
      nextCursor = '';
      shown.clear();
      cards.replaceChildren();
    }
    loading = true;
    more.disabled = true;
    setStatus('Loading…');
    var path = 'v1/reviews?limit=' + PAGE_SIZE + (nextCursor ? '&cursor=' + encodeURIComponent(nextCursor) : '');
    return api('GET', path).then(function (res) {
      loading = false;
      more.disabled = false;
      if (res.status === 401 || res.status === 403) {
        showKeyPrompt(errorText(res));
        return;
      }
      if (res.status !== 200 || !res.body || typeof res.body !== 'object') {
        setStatus('Could not load the inbox: ' + errorText(res));
        return;
      }
      var reviews = Array.isArray(res.body.reviews) ? res.body.reviews : [];
      var first = cards.children.length === 0;
      reviews.forEach(function (r) {
        var k = text(r.request_id) + '\n' + text(r.decision_id);
        if (shown.has(k)) { return; }
        shown.add(k);
        cards.appendChild(card(r));
      });
      nextCursor = typeof res.body.next_cursor === 'string' ? res.body.next_cursor : '';
      more.hidden = !nextCursor;
      setStatus('');
      updateCount();
      if (first && cards.firstElementChild && !inbox.contains(document.activeElement)) {
        cards.firstElementChild.focus();
      }
    });
  }

  function setBusy(li, busy) {
    li.setAttribute('aria-busy', busy ? 'true' : 'false');
    li.querySelectorAll('button.option').forEach(function (b) { b.disabled = busy; });
  }

  function showCardError(li, message) {
    var e = li.querySelector('.error');
    e.textContent = message;
    e.hidden = !message;
  }

  // answer sends the reviewer's option as the decision's feedback; the
  // card leaves the list once the front door recorded it (201) or
  // already held it (200).
  function answer(li, option) {
    if (!li.isConnected || li.getAttribute('aria-busy') === 'true') { return; }
    setBusy(li, true);
    showCardError(li, '');
    var rid = li.dataset.requestId;
    var did = li.dataset.decisionId;
    var path = 'v1/decisions/' + encodeURIComponent(did) + '/feedback?request_id=' + encodeURIComponent(rid);
    api('POST', path, { option: option, source: 'review', note: '' }).then(function (res) {
      if (res.status === 201 || res.status === 200) {
        var replay = res.body && res.body.replay === true;
        removeCard(li);
        setStatus('Answered ' + did + ' with ' + option + (replay ? ' (it already was its label)' : '') + '.');
        return;
      }
      setBusy(li, false);
      showCardError(li, 'Not recorded: ' + errorText(res));
      if (res.status === 401) { setStatus('The key was refused: ' + errorText(res)); }
    });
  }

  function removeCard(li) {
    var hadFocus = li.contains(document.activeElement);
    var next = li.nextElementSibling || li.previousElementSibling;
    shown.delete(li.dataset.requestId + '\n' + li.dataset.decisionId);
    li.remove();
    if (hadFocus && next) { next.focus(); }
    updateCount();
    if (cards.children.length === 0 && nextCursor) { load(false); }
  }

  // Keyboard: 1–9 answers with the Nth option of the focused card, or of
  // the first card when focus is elsewhere. Typing in a field is left alone.
  document.addEventListener('keydown', function (ev) {
    if (inbox.hidden || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) { return; }
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) { return; }
    if (!/^[1-9]$/.test(ev.key)) { return; }
    var active = document.activeElement;
    var li = active && active.closest ? active.closest('#cards > .card') : null;
    if (!li) { li = cards.firstElementChild; }
    if (!li) { return; }
    var b = li.querySelectorAll('button.option')[Number(ev.key) - 1];
    if (!b) { return; }
    ev.preventDefault();
    answer(li, b.dataset.option);
  });

  keyForm.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var k = keyInput.value.trim();
    keyInput.value = '';
    if (!k) { return; }
    apiKey = k;
    keyError.hidden = true;
    keyError.textContent = '';
    keySection.hidden = true;
    inbox.hidden = false;
    load(true);
  });
  more.addEventListener('click', function () { load(false); });
  byId('reload').addEventListener('click', function () { load(true); });
  byId('forget').addEventListener('click', function () { showKeyPrompt(''); });
  keyInput.focus();
}());
