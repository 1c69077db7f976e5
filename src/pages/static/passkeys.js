// Gatehouse passkeys: the WebAuthn ceremonies of the sign-in and account pages.
// Loaded as a file (the pages' Content-Security-Policy allows no inline script), after
// SimpleWebAuthn's browser bundle (window.SimpleWebAuthnBrowser). Everything else on those
// pages works without JavaScript: this script only adds the passkey prompts.
(function () {
  'use strict';

  var W = window.SimpleWebAuthnBrowser;
  if (!W || !W.browserSupportsWebAuthn()) return;

  function field(root, name) {
    var input = root && root.querySelector('input[name="' + name + '"]');
    return input ? input.value : undefined;
  }

  function say(text) {
    var status = document.getElementById('passkey-status');
    if (status) status.textContent = text;
  }

  // POST JSON to our own origin; resolves to { ok, status, body }.
  function postJson(url, body) {
    return fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
    }).then(function (res) {
      return res.json().then(
        function (json) { return { ok: res.ok, status: res.status, body: json }; },
        function () { return { ok: false, status: res.status, body: {} }; }
      );
    });
  }

  // Posts the ceremony's answer as an ordinary form, so the server answers with a navigation
  // (redirects onward, or the page again with a message) exactly as for the password form.
  function submitForm(action, fields) {
    var form = document.createElement('form');
    form.method = 'post';
    form.action = action;
    form.hidden = true;
    Object.keys(fields).forEach(function (name) {
      if (fields[name] === undefined) return;
      var input = document.createElement('input');
      input.type = 'hidden';
      input.name = name;
      input.value = fields[name];
      form.appendChild(input);
    });
    document.body.appendChild(form);
    form.submit();
  }

  function ceremonyError(err) {
    var name = err && err.name;
    if (name === 'AbortError') return undefined; // replaced by another prompt: say nothing
    if (name === 'NotAllowedError') return 'The passkey prompt was closed or timed out. Try again.';
    if (name === 'InvalidStateError') return 'This passkey is already registered.';
    if (name === 'SecurityError') return 'Passkeys are not available on this address.';
    return 'The passkey prompt failed' + (err && err.message ? ': ' + err.message : '.');
  }

  // ---- Sign-in page (/login) and the passkey step (/login/passkey) ----
  var area = document.getElementById('passkey-area');
  if (area) {
    var mode = area.getAttribute('data-mode');
    var holder = mode === 'step' ? document.getElementById('passkey-step') : document.getElementById('login-form');
    var context = {
      csrf: field(holder, 'csrf'),
      request: field(holder, 'request'),
      return_to: field(holder, 'return_to'),
    };
    var optionsUrl = area.getAttribute('data-options');
    var submitUrl = area.getAttribute('data-submit');
    var button = document.getElementById('passkey-button');
    area.hidden = false;

    var signIn = function (ceremonyMode, email) {
      var body = { csrf: context.csrf, request: context.request, mode: ceremonyMode };
      if (email) body.email = email;
      return postJson(optionsUrl, body).then(function (answer) {
        if (!answer.ok) throw new Error(answer.body.error_description || 'the service refused (' + answer.status + ')');
        return W.startAuthentication({ optionsJSON: answer.body, useBrowserAutofill: ceremonyMode === 'autofill' });
      }).then(function (credential) {
        say('Signing you in…');
        submitForm(submitUrl, {
          csrf: context.csrf,
          request: context.request,
          return_to: context.return_to,
          mode: mode === 'step' ? 'step' : 'sign-in',
          credential: JSON.stringify(credential),
        });
      });
    };

    button.addEventListener('click', function () {
      var emailInput = document.getElementById('email');
      var email = mode === 'step' ? undefined : (emailInput && emailInput.value.trim()) || undefined;
      button.disabled = true;
      say('Follow the prompt of your browser or device…');
      signIn(mode === 'step' ? 'step' : 'button', email).catch(function (err) {
        var text = ceremonyError(err);
        if (text) say(text);
      }).then(function () { button.disabled = false; });
    });

    // Passkeys offered in the email field's autofill (conditional mediation), where supported.
    if (mode !== 'step') {
      W.browserSupportsWebAuthnAutofill().then(function (supported) {
        if (!supported) return;
        return signIn('autofill').catch(function (err) {
          var text = ceremonyError(err);
          if (text && err.name !== 'NotAllowedError') say(text);
        });
      });
    }
  }

  // ---- Account page (/account): adding a passkey ----
  var addForm = document.getElementById('add-passkey-form');
  if (addForm) {
    var addButton = document.getElementById('add-passkey-button');
    addForm.addEventListener('submit', function (event) {
      var credentialInput = addForm.querySelector('input[name="credential"]');
      if (credentialInput.value) return; // the ceremony is done: let the form go
      event.preventDefault();
      addButton.disabled = true;
      say('Follow the prompt of your browser or device…');
      postJson(addForm.getAttribute('data-options'), { csrf: field(addForm, 'csrf') }).then(function (answer) {
        if (answer.status === 401 && answer.body.login_url) {
          window.location.href = answer.body.login_url;
          return;
        }
        if (!answer.ok) throw new Error(answer.body.error_description || 'the service refused (' + answer.status + ')');
        return W.startRegistration({ optionsJSON: answer.body }).then(function (credential) {
          credentialInput.value = JSON.stringify(credential);
          say('Saving your passkey…');
          addForm.submit();
        });
      }).catch(function (err) {
        var text = ceremonyError(err);
        if (text) say(text);
        addButton.disabled = false;
      });
    });
  }
})();
