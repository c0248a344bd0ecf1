// svc studio: the little glue htmx does not cover. Hash routing, the CSRF header, dialogs,
// copy buttons, the quick-start card's remembered choices, and visible errors.
(function () {
  "use strict";

  var csrf = document.querySelector('meta[name="csrf-token"]').content;

  // Error responses carry a rendered fragment (the server decides where it goes with HX-Retarget),
  // so htmx must swap them instead of dropping them. 204 means "nothing to show".
  htmx.config.responseHandling = [
    { code: "204", swap: false },
    { code: "[23]..", swap: true },
    { code: "[45]..", swap: true, error: true },
    { code: "...", swap: false }
  ];

  // Every request carries the per-launch token; the server requires it on /api/deployments* and on
  // every state-changing call.
  document.addEventListener("htmx:configRequest", function (e) {
    e.detail.headers["X-CSRF-Token"] = csrf;
  });

  // ---- hash routes: #/endpoints, #/endpoints/<id>, #/endpoints/<id>/<section> and #/fleet; anything else
  // is "not found" ----
  // notice is shown once the next view has loaded (a delete's confirmation, on the list).
  var pendingNotice = null;
  var sections = ["keys", "runs", "usage", "canary", "evals", "settings"];
  function route() {
    var h = location.hash;
    if (h === "" || h === "#" || h === "#/") {
      h = "#/endpoints";
    }
    var url = null;
    // The Runs section takes its filters after its route: #/endpoints/<id>/runs?status=error&arm=canary.
    var m = h.match(/^#\/endpoints\/([^/?#]+)(?:\/([a-z]+))?(?:\?([^#]*))?$/);
    // The Evals section takes the eval it opens, its pairs' filters and the form's candidate:
    // #/endpoints/<id>/evals?eval=ev_…&verdict=baseline&check=json.
    if (m && (!m[2] || sections.indexOf(m[2]) >= 0) && (!m[3] || m[2] === "runs" || m[2] === "evals")) {
      var id = decodeURIComponent(m[1]);
      var section = m[2] || "";
      var qs = m[3] ? (m[2] === "runs" ? runFilterQuery(m[3]) : evalQuery(m[3])) : "";
      url = "/api/deployments/" + encodeURIComponent(id) + "?section=" + section + (qs ? "&" + qs : "");
      // Another section of the endpoint already shown: swap the section alone, keep the head and
      // the tab bar, and put focus on the section's heading.
      var view = document.querySelector('#main [data-testid="endpoint-detail"]');
      if (view && view.getAttribute("data-id") === id && document.getElementById("detail-section")) {
        htmx.ajax("GET", url + "&part=section", { target: "#detail-section", swap: "innerHTML" })
          .then(function () { sectionLoaded(section); });
        return;
      }
    } else if (h === "#/endpoints" || h === "#/endpoints/") {
      url = "/api/deployments";
    } else if (h === "#/fleet") {
      url = "/api/fleet";
    }
    if (url === null) {
      notFound(h);
      return;
    }
    htmx.ajax("GET", url, { target: "#main", swap: "innerHTML" }).then(viewLoaded);
  }
  // The Runs filters a hash route may carry, and only those (the view's own parameters stay its own).
  var runFilters = ["status", "key", "arm", "surface", "range"];
  function evalQuery(qs) {
    var from = new URLSearchParams(qs);
    var to = new URLSearchParams();
    ["eval", "verdict", "check", "candidate"].forEach(function (name) {
      if (from.get(name)) {
        to.set(name, from.get(name));
      }
    });
    return to.toString();
  }
  function runFilterQuery(qs) {
    var from = new URLSearchParams(qs);
    var to = new URLSearchParams();
    runFilters.forEach(function (name) {
      if (from.get(name)) {
        to.set(name, from.get(name));
      }
    });
    return to.toString();
  }
  // A change of the Runs filters (htmx reloads the list) is kept in the hash route, without loading the
  // view again: Back, a reload or a shared link show the same runs.
  document.addEventListener("change", function (e) {
    var form = e.target.closest && e.target.closest("[data-runs-filter]");
    if (!form) {
      return;
    }
    var qs = runFilterQuery(new URLSearchParams(new FormData(form)).toString());
    var hash = "#/endpoints/" + encodeURIComponent(form.getAttribute("data-runs-filter")) + "/runs" + (qs ? "?" + qs : "");
    history.replaceState(null, "", hash);
  });
  // A section swapped in: the tab bar marks it, and its first heading takes focus.
  function sectionLoaded(section) {
    var box = document.getElementById("detail-section");
    if (!box) {
      return;
    }
    box.setAttribute("data-section", section);
    document.querySelectorAll("#main .tabs a[data-section]").forEach(function (a) {
      if (a.getAttribute("data-section") === section) {
        a.setAttribute("aria-current", "page");
      } else {
        a.removeAttribute("aria-current");
      }
    });
    var heading = box.querySelector("h2");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus({ preventScroll: true });
    }
    currentTabInView();
  }
  // On a phone the tab bar scrolls sideways: the current tab is scrolled into it.
  function currentTabInView() {
    var a = document.querySelector('#main .tabs a[aria-current="page"]');
    if (a) {
      a.parentNode.scrollLeft = Math.max(0, a.offsetLeft - a.parentNode.offsetLeft - 16);
    }
  }
  // The view is in place: its title takes focus (screen readers announce it), and a pending notice shows.
  function viewLoaded() {
    focusTitle();
    currentTabInView();
    if (pendingNotice) {
      showNotice(pendingNotice);
      pendingNotice = null;
    }
  }
  function focusTitle() {
    var title = document.querySelector("#main h1");
    if (title) {
      title.setAttribute("tabindex", "-1");
      title.focus({ preventScroll: true });
    }
  }
  function notFound(hash) {
    var tpl = document.getElementById("not-found-template");
    var main = document.getElementById("main");
    main.replaceChildren(tpl.content.cloneNode(true));
    var code = main.querySelector("[data-route]");
    if (code) {
      code.textContent = hash; // text, never HTML
    }
    viewLoaded();
  }
  window.addEventListener("hashchange", function () {
    clearFlash();
    route();
  });
  document.addEventListener("DOMContentLoaded", route);

  // A link to the view already shown loads it again (the hash does not change, so no hashchange).
  document.addEventListener("click", function (e) {
    var a = e.target.closest('a[href^="#/"]');
    if (a && a.getAttribute("href") === currentHash()) {
      e.preventDefault();
      clearFlash();
      route();
    }
  });
  function currentHash() {
    var h = location.hash;
    return h === "" || h === "#" || h === "#/" ? "#/endpoints" : h;
  }
  // Retry on a view that failed to load: load it again.
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-retry]")) {
      clearFlash();
      route();
    }
  });

  // ---- server-sent triggers ----
  // svc:created (after the swap): the create form succeeded; #main shows the list, read again, with
  // the new endpoint's row marked, and the flash a notice linking to it. Close the form, point the
  // hash route at the list without loading it again, and put focus on the new row's link (Enter
  // opens the endpoint). (An object sent in HX-Trigger arrives as event.detail itself.)
  document.addEventListener("svc:created", function (e) {
    var v = e.detail || {};
    closeDialog(document.getElementById("create-dialog"));
    if (currentHash() !== "#/endpoints") {
      history.pushState(null, "", "#/endpoints");
    }
    var link = document.querySelector('#main tr[data-new="true"] a.slug-link');
    if (link) {
      link.focus();
    } else {
      focusTitle();
    }
    if (v.notice) {
      announce(v.notice);
    }
  });
  // svc:key-limits-saved: a key's limits dialog saved; the keys table came back without the dialog,
  // so put focus back on that key's Limits button.
  document.addEventListener("svc:key-limits-saved", function (e) {
    var id = e.detail && e.detail.value;
    var btn = id && document.querySelector('[data-open-dialog="key-limits-' + id + '"]');
    if (btn) {
      btn.focus();
    }
    announce("Key limits saved.");
  });
  // svc:navigate: go to another view, e.g. the list after a delete, and say what happened there.
  document.addEventListener("svc:navigate", function (e) {
    var v = e.detail || {};
    var hash = v.hash || "#/endpoints";
    pendingNotice = v.notice || null;
    if (location.hash === hash) {
      clearFlash();
      route();
    } else {
      location.hash = hash;
    }
  });

  // ---- keyboard focus survives a view re-render ----
  // An action on the detail view (enable, auth mode) re-renders #main, which would drop focus to the
  // page start. Put it back on the same control, or on its still-enabled sibling.
  // Read when the request is configured, before hx-disabled-elt takes focus away from the button.
  var lastFocus = null;
  document.addEventListener("htmx:configRequest", function (e) {
    // Only a request that re-renders the view counts: the runs card loading itself as the new view
    // appears must not overwrite what the view's own request saw.
    if (!e.detail.target || e.detail.target.id !== "main") {
      return;
    }
    var a = document.activeElement;
    lastFocus = a && a.id ? { id: a.id, group: a.getAttribute("data-focus-group") } : null;
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    if (!lastFocus || !e.detail.target || e.detail.target.id !== "main") {
      return;
    }
    var a = document.activeElement;
    if (a && a !== document.body && document.contains(a)) {
      lastFocus = null; // something in the new view already took focus
      return;
    }
    var el = document.getElementById(lastFocus.id);
    if ((!el || el.disabled) && lastFocus.group) {
      el = document.querySelector('[data-focus-group="' + lastFocus.group + '"]:not(:disabled)');
    }
    if (el && !el.disabled) {
      el.focus();
    }
    lastFocus = null;
  });

  // ---- loading and error states ----
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.target && e.detail.target.id === "main") {
      document.getElementById("main").setAttribute("aria-busy", "true");
    }
  });
  document.addEventListener("htmx:afterRequest", function () {
    document.getElementById("main").removeAttribute("aria-busy");
  });
  // The studio server itself did not answer (stopped, or the network dropped).
  document.addEventListener("htmx:sendError", function () {
    showFlash("The studio server did not answer. Is svc dev still running?");
  });
  document.addEventListener("htmx:timeout", function () {
    showFlash("The request timed out.");
  });

  function showFlash(msg) {
    var flash = document.getElementById("flash");
    var div = document.createElement("div");
    div.className = "alert alert-error";
    div.setAttribute("role", "alert");
    div.textContent = msg; // text, never HTML
    flash.replaceChildren(div);
  }
  // A confirmation, in the flash area (role=status) and announced.
  function showNotice(msg) {
    var tpl = document.getElementById("notice-template");
    var flash = document.getElementById("flash");
    flash.replaceChildren(tpl.content.cloneNode(true));
    flash.querySelector(".alert-msg").textContent = msg; // text, never HTML
    announce(msg);
  }
  function clearFlash() {
    document.getElementById("flash").replaceChildren();
  }
  function announce(msg) {
    var s = document.getElementById("sr-status");
    if (s) {
      s.textContent = msg;
    }
  }

  // ---- dialogs ----
  function openDialog(d) {
    if (!d) {
      return;
    }
    d.showModal();
    var ready = Promise.resolve();
    if (d.hasAttribute("data-mint")) {
      // A no-op when the credentials file exists; otherwise the one mint, by POST with the token. The
      // identity badge shows the result.
      ready = htmx.ajax("POST", "/api/credentials", { target: "#identity", swap: "innerHTML" });
    }
    var opened = function () {
      d.dispatchEvent(new CustomEvent("svc:open"));
    };
    ready.then(opened, opened);
    var first = d.querySelector("input:not([type=hidden]):not([type=radio]), select, textarea");
    if (first) {
      first.focus();
    }
  }
  function closeDialog(d) {
    if (d && d.open) {
      d.close();
      resetDialog(d); // at once: the close event below comes a task later
    }
  }
  // Dialogs whose body changes put their first body back on closing: the key dialog its prompt, so
  // that the plaintext leaves the page; the run dialog its loading line, so that the next run opened
  // never shows the last one while it loads.
  var dialogResets = {
    "key-dialog": ["key-form-template", "key-dialog-body"],
    "run-dialog": ["run-loading-template", "run-dialog-body"]
  };
  function resetDialog(d) {
    var r = dialogResets[d.id];
    if (!r) {
      return;
    }
    var tpl = document.getElementById(r[0]);
    var body = document.getElementById(r[1]);
    if (tpl && body) {
      body.replaceChildren(tpl.content.cloneNode(true));
      htmx.process(body);
    }
  }
  document.addEventListener("click", function (e) {
    var opener = e.target.closest("[data-open-dialog]");
    if (opener) {
      openDialog(document.getElementById(opener.getAttribute("data-open-dialog")));
      return;
    }
    var closer = e.target.closest("[data-close-dialog]");
    if (closer) {
      closeDialog(closer.closest("dialog"));
      return;
    }
    if (e.target.closest("[data-reload]")) {
      location.reload(); // a tab from before a restart: the page again, same hash route, fresh token
      return;
    }
    var dismiss = e.target.closest("[data-dismiss]");
    if (dismiss) {
      dismiss.closest(".alert").remove();
    }
  });
  // Escape closes a dialog without our click handler: reset it then too (the key leaves the page).
  document.addEventListener(
    "close",
    function (e) {
      resetDialog(e.target);
    },
    true
  );

  // ---- field errors ----
  // A field's error goes as soon as the field changes: it was about the value that was there. Changing
  // the create form's target kind also clears the errors of the target's pickers (they were about the
  // previous choice), and choosing another job clears the step's.
  function clearFieldError(field) {
    if (!field) {
      return;
    }
    field.classList.remove("has-error");
    field.querySelectorAll(".field-error").forEach(function (p) {
      p.textContent = "";
    });
    field.querySelectorAll('[aria-invalid="true"]').forEach(function (el) {
      el.setAttribute("aria-invalid", "false");
    });
  }
  function fieldEdited(e) {
    var t = e.target;
    if (!t || !t.closest) {
      return;
    }
    clearFieldError(t.closest(".field.has-error"));
    var form = t.closest("#create-form, [data-target-form]");
    if (!form) {
      return;
    }
    if (t.name === "kind") {
      form.querySelectorAll(".for-job, .for-checkpoint, .for-model").forEach(clearFieldError);
    } else if (t.name === "jobId") {
      clearFieldError(form.querySelector(".for-checkpoint"));
    }
  }
  document.addEventListener("input", fieldEdited);
  document.addEventListener("change", fieldEdited);
  // A form that comes back refused puts focus on its first field in error, or on its message when no
  // field is to blame, so that keyboard and screen-reader users land where the problem is.
  htmx.onLoad(function (elt) {
    if (!elt.querySelector) {
      return;
    }
    var reload = elt.querySelector("[data-reload]");
    if (reload) {
      reload.focus(); // a tab from before a restart: Enter reloads it
      return;
    }
    var field = elt.querySelector(".has-error");
    var target = field && field.querySelector("input:not([type=hidden]), select, textarea");
    if (!target) {
      target = elt.querySelector("[data-form-error]");
      if (target) {
        target.setAttribute("tabindex", "-1");
      }
    }
    if (target) {
      target.focus();
      if (target.type === "text" && target.setSelectionRange) {
        // The caret after the value, where a correction usually goes ("taken" → "taken-2").
        target.setSelectionRange(target.value.length, target.value.length);
      }
    }
  });

  // ---- the create form's step picker: the chosen job's checkpoints ----
  // The job picker's options carry their checkpoints' steps (data-steps); the step picker offers those,
  // keeping the step chosen before a failed submit (data-selected).
  function fillSteps(keep, job) {
    job = job || document.getElementById("create-job");
    var step = document.getElementById(job && job.getAttribute("data-step-picker") || "create-step");
    if (!job || !step) {
      return;
    }
    var opt = job.options[job.selectedIndex];
    var chosen = opt && opt.value;
    var steps = chosen ? (opt.getAttribute("data-steps") || "").split(" ").filter(Boolean) : [];
    var first = document.createElement("option");
    first.value = "";
    first.textContent = !chosen ? "Choose a job first" : steps.length ? "Choose a step…" : "This job has no checkpoints";
    var opts = [first];
    steps.forEach(function (s) {
      var o = document.createElement("option");
      o.value = s;
      o.textContent = "Step " + s;
      o.selected = s === keep;
      opts.push(o);
    });
    step.replaceChildren.apply(step, opts);
  }
  document.addEventListener("change", function (e) {
    if (e.target.id === "create-job") {
      fillSteps("");
    } else if (e.target.hasAttribute && e.target.hasAttribute("data-step-picker")) {
      fillSteps("", e.target); // the canary form's job picker fills its own step picker
    }
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    var t = e.detail.target;
    if (t && t.id === "create-job") {
      var step = document.getElementById("create-step");
      fillSteps(step.value || step.getAttribute("data-selected") || "");
    } else if (t && t.hasAttribute && t.hasAttribute("data-step-picker")) {
      // A canary or target form's job picker loaded: its step picker offers the job's steps, keeping
      // the one chosen before a refused submit.
      var own = document.getElementById(t.getAttribute("data-step-picker"));
      fillSteps(own && (own.value || own.getAttribute("data-selected")) || "", t);
    }
  });

  // ---- "Show more" and "Load more" keep the keyboard's place ----
  // The button's row is replaced by the next page's rows: focus goes to the first of them (its first
  // link or button) instead of falling back to the page.
  var moreAfter = null;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-more")) {
      var row = elt.closest("tr");
      moreAfter = row ? { prev: row.previousElementSibling, body: row.parentNode } : null;
    }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!moreAfter) {
      return;
    }
    var m = moreAfter;
    moreAfter = null;
    var next = m.prev ? m.prev.nextElementSibling : m.body.firstElementChild;
    var target = next && next.querySelector("a[href], button");
    if (target) {
      target.focus();
    }
  });

  // ---- copy buttons ----
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // Fallback for browsers that refuse the async clipboard.
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    var ok = document.execCommand("copy");
    ta.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  function copyFeedback(btn, ok) {
    var old = btn.getAttribute("data-label") || btn.textContent;
    btn.setAttribute("data-label", old);
    btn.textContent = ok ? "Copied" : "Copy failed";
    announce(ok ? "Copied to the clipboard." : "Could not copy; select the text instead.");
    setTimeout(function () {
      btn.textContent = old;
    }, 1500);
  }
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("[data-copy], [data-copy-sample]");
    if (!btn) {
      return;
    }
    var el;
    if (btn.hasAttribute("data-copy-sample")) {
      el = document.querySelector("#quickstart pre:not([hidden]) code");
    } else {
      el = document.querySelector(btn.getAttribute("data-copy"));
    }
    if (!el) {
      return;
    }
    copyText(el.textContent).then(
      function () {
        copyFeedback(btn, true);
      },
      function () {
        copyFeedback(btn, false);
      }
    );
  });

  // ---- quick-start card: language choice and hidden state survive reloads ----
  var QS_HIDDEN = "svc.quickstart.hidden";
  var QS_LANG = "svc.quickstart.lang";
  function storeGet(k) {
    try {
      return localStorage.getItem(k);
    } catch (err) {
      return null;
    }
  }
  function storeSet(k, v) {
    try {
      if (v === null) {
        localStorage.removeItem(k);
      } else {
        localStorage.setItem(k, v);
      }
    } catch (err) {
      /* private mode: the choice just is not remembered */
    }
  }
  function applyQuickStart(root) {
    var card = root.querySelector ? root.querySelector("#quickstart") : null;
    if (!card) {
      card = document.getElementById("quickstart");
    }
    if (!card) {
      return;
    }
    var hidden = storeGet(QS_HIDDEN) === "1";
    card.hidden = hidden;
    var show = document.querySelector("[data-qs-show]");
    if (show) {
      show.hidden = !hidden;
    }
    var lang = storeGet(QS_LANG) || "curl";
    var sel = card.querySelector("[data-qs-lang]");
    if (sel) {
      sel.value = lang;
      if (sel.value !== lang) {
        lang = sel.value;
      }
    }
    // The operation's sample in the language, or its recipe (data-lang "any": one text, the
    // language control then off).
    var opSel = card.querySelector("[data-qs-op]");
    var op = opSel ? opSel.value : "chat";
    var agent = !!(opSel && opSel.selectedOptions[0] && opSel.selectedOptions[0].hasAttribute("data-agent"));
    if (sel) {
      sel.disabled = agent;
    }
    card.querySelectorAll("pre[data-lang]").forEach(function (pre) {
      var l = pre.getAttribute("data-lang");
      pre.hidden = pre.getAttribute("data-op") !== op || (l !== lang && l !== "any");
    });
  }
  htmx.onLoad(applyQuickStart);
  document.addEventListener("change", function (e) {
    if (e.target.matches("[data-qs-lang]")) {
      storeSet(QS_LANG, e.target.value);
      applyQuickStart(document);
    } else if (e.target.matches("[data-qs-op]")) {
      applyQuickStart(document);
    }
  });
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-qs-hide]")) {
      storeSet(QS_HIDDEN, "1");
      applyQuickStart(document);
      var show = document.querySelector("[data-qs-show]");
      if (show) {
        show.focus();
      }
    } else if (e.target.closest("[data-qs-show]")) {
      storeSet(QS_HIDDEN, null);
      applyQuickStart(document);
      var hide = document.querySelector("[data-qs-hide]");
      if (hide) {
        hide.focus();
      }
    }
  });

  // ---- the runs card's Export: the form posts its filters (htmx); once they are checked the studio
  // names the download link in svc:download, which is followed here as a download, so that the browser
  // writes the file to disk as it arrives. Errors and the counts show under the button (htmx). ----
  // An eval opened (started from the form, or polled) is kept in the hash route with its pairs' filters,
  // so that a reload or a shared link opens it again as it was:
  // #/endpoints/<id>/evals?eval=<evalId>&verdict=<verdict>&check=<check>.
  document.body.addEventListener("htmx:afterSwap", function (e) {
    var open = document.querySelector("#eval-detail [data-eval-id]");
    if (!open || !e.detail || !e.detail.target || !e.detail.target.closest || !e.detail.target.closest("#evals, #eval-detail, #detail-section")) {
      return;
    }
    var q = new URLSearchParams();
    q.set("eval", open.getAttribute("data-eval-id"));
    ["verdict", "check"].forEach(function (name) {
      var v = open.getAttribute("data-" + name);
      if (v) {
        q.set(name, v);
      }
    });
    var hash = "#/endpoints/" + encodeURIComponent(open.getAttribute("data-endpoint-id")) + "/evals?" + q.toString();
    if (location.hash !== hash) {
      history.replaceState(null, "", hash);
    }
  });
  // The export's result line (an error, the counts) is brought into view when it arrives, so that a
  // short window never hides what became of the click.
  document.body.addEventListener("htmx:afterSwap", function (e) {
    var el = e.detail && e.detail.target;
    if (el && el.id === "export-result" && el.textContent.trim() !== "") {
      el.scrollIntoView({ block: "nearest" });
    }
  });
  document.addEventListener("svc:download", function (e) {
    var a = document.createElement("a");
    a.href = e.detail.url;
    a.download = ""; // the name the studio gives it: <slug>-runs.jsonl
    document.body.appendChild(a);
    a.click();
    a.remove();
  });
})();
