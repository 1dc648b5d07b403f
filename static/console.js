/* Recovery Console: SLA countdowns, toasts, the unknown-effect gate and keyboard triage.
   Plain JavaScript on top of server-rendered HTML; every form also works without it. */
(function () {
  "use strict";

  // --- SLA countdowns: ticked from data attributes, so a polled swap needs no re-init.
  function parseTime(value) {
    // Django writes microseconds; Date.parse wants at most milliseconds.
    return Date.parse(String(value || "").replace(/(\.\d{3})\d+/, "$1"));
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function format(ms) {
    var s = Math.floor(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    var text = d ? d + "d " + h + "h" : h ? h + "h " + pad(m) + "m" : m + ":" + pad(s % 60);
    return text + (ms < 0 ? " over" : " left");
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll(".countdown[data-due]").forEach(function (el) {
      var left = parseTime(el.dataset.due) - now;
      var state = el.dataset.breached || left <= 0 ? "breached" : now >= parseTime(el.dataset.warn) ? "warn" : "ok";
      el.textContent = format(left);
      el.dataset.sla = state;
      var row = el.closest(".sla-row") || el;
      row.classList.toggle("sla-warn", state === "warn");
      row.classList.toggle("sla-breached", state === "breached");
    });
  }

  // --- Toasts: server messages arrive in the page or in an HX-Trigger header.
  function toast(level, text) {
    var box = document.getElementById("flash");
    if (!box) return;
    var el = document.createElement("div");
    el.className = "toast toast-" + (level || "info");
    el.setAttribute("role", level === "error" ? "alert" : "status");
    el.textContent = text; // text, never HTML: messages can quote agent data
    decorate(el);
    box.appendChild(el);
  }

  function decorate(el) {
    var close = document.createElement("button");
    close.type = "button";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", function () { el.remove(); });
    el.appendChild(close);
    // Errors stay until dismissed: an operator must not miss who holds a checkpoint.
    if (!el.classList.contains("toast-error")) setTimeout(function () { el.remove(); }, 6000);
  }

  document.addEventListener("console:messages", function (e) {
    ((e.detail && e.detail.items) || []).forEach(function (m) { toast(m.level, m.text); });
  });

  // --- Resume and retry stay disabled until every unknown effect has an answer.
  function gate(form) {
    var ok = Array.prototype.every.call(form.querySelectorAll("[data-confirmation-group]"), function (group) {
      var chosen = group.querySelector("input[type=radio]:checked");
      var ref = group.querySelector("input[name^=ref_]");
      return chosen && (chosen.value !== "happened" || (ref && ref.value.trim() !== ""));
    });
    form.querySelectorAll("[data-needs-confirmations]").forEach(function (button) {
      button.disabled = !ok;
      button.title = ok ? "" : "Confirm every unknown effect first";
    });
  }

  function gateAll(root) {
    (root || document).querySelectorAll("#decision-form").forEach(gate);
  }

  ["change", "input"].forEach(function (type) {
    document.addEventListener(type, function (e) {
      var form = e.target.closest && e.target.closest("#decision-form");
      if (form) gate(form);
    });
  });

  // --- Keyboard triage on the queue: j/k move, Enter opens, c claims, ? helps.
  var selectedId = null;

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#queue-table tr[data-id]")); }

  function select(row, scroll) {
    rows().forEach(function (r) { r.classList.remove("is-selected"); r.removeAttribute("aria-selected"); });
    if (!row) return;
    row.classList.add("is-selected");
    row.setAttribute("aria-selected", "true");
    selectedId = row.dataset.id;
    if (scroll) row.scrollIntoView({ block: "nearest" });
  }

  function help() { return document.getElementById("kbd-help"); }

  function toggleHelp() {
    var dialog = help();
    if (!dialog) return;
    if (dialog.open) dialog.close(); else dialog.showModal();
  }

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    // Focus can linger on the help dialog's Close button until its async close event has run.
    var target = e.target.closest && e.target.closest("dialog:not([open])") ? document.body : e.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) return;
    if (e.key === "?") { toggleHelp(); e.preventDefault(); return; }
    if (!document.querySelector("[data-queue]") || (help() && help().open)) return;
    var list = rows();
    var i = list.findIndex(function (r) { return r.dataset.id === selectedId; });
    if (e.key === "j") select(list[Math.min(i + 1, list.length - 1)], true);
    else if (e.key === "k") select(list[Math.max(i - 1, 0)], true);
    else if (e.key === "Enter" && i >= 0 && !target.closest("a, button")) window.location.href = list[i].dataset.href;
    else if (e.key === "x" && i >= 0) {
      var box = list[i].querySelector("input.pick");
      if (box) { box.checked = !box.checked; box.dispatchEvent(new Event("change", { bubbles: true })); }
    } else if (e.key === "c" && i >= 0) {
      var claim = list[i].querySelector("[data-testid=claim]");
      if (claim) claim.form.requestSubmit(claim);
      else toast("warning", list[i].dataset.cannotClaim || "This checkpoint cannot be claimed now.");
    } else return;
    e.preventDefault();
  });

  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-help-open]")) { toggleHelp(); return; }
    if (e.target.closest("a, button, input, select, textarea, label, form, details")) return;
    var row = e.target.closest("#queue-table tr[data-href]");
    if (row && !window.getSelection().toString()) window.location.href = row.dataset.href;
  });

  // A destructive action says what it will do and asks first (abort); without JavaScript the server's
  // own checks still apply.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm.replace(/\s+/g, " "))) { e.preventDefault(); e.stopImmediatePropagation(); }
  }, true);

  // The queue's poll waits while an operator types in a row (a rejection note, an open "Reject…").
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute("data-poll-waits-while-typing")) return;
    var active = document.activeElement;
    var typing = active && elt.contains(active) && active.matches("input:not([type=checkbox]), textarea, select");
    if (typing || elt.querySelector("details[open]")) e.preventDefault();
  });

  // The workbench's and the incident page's live regions are replaced whole when their state changes:
  // carry over what the operator typed or ticked, the panels they opened, and where the caret was.
  var LIVE_REGIONS = ["workbench-live", "incident-live"];
  var kept = null, keptId = null;

  function fieldKey(el) {
    var form = el.form;
    return (form ? (form.id || form.getAttribute("action")) : "") + "|" + el.name + "|" +
      (el.type === "radio" || el.type === "checkbox" ? el.value : "");
  }

  function snapshot(root, answered) {
    var fields = {}, open = [], focus = null, active = document.activeElement;
    root.querySelectorAll("input[name], textarea[name], select[name]").forEach(function (el) {
      if (el.type === "hidden" || el.name === "csrfmiddlewaretoken") return;
      if (answered && el.form === answered) return; // the form the server answers: its answer shows it
      fields[fieldKey(el)] = el.type === "radio" || el.type === "checkbox" ? el.checked : el.value;
    });
    // An action's answer closes the panels it came from; a poll keeps them as they were, and where the page was.
    if (!answered) {
      root.querySelectorAll("details[data-keep]").forEach(function (d) { if (d.open) open.push(d.dataset.keep); });
    }
    if (active && root.contains(active) && active.name) {
      focus = { key: fieldKey(active), start: active.selectionStart, end: active.selectionEnd };
    }
    return { fields: fields, open: open, focus: focus, scroll: answered ? null : window.scrollY };
  }

  function restore(root, state) {
    root.querySelectorAll("input[name], textarea[name], select[name]").forEach(function (el) {
      var key = fieldKey(el);
      if (!(key in state.fields)) return;
      if (el.type === "radio" || el.type === "checkbox") el.checked = state.fields[key];
      else if (el.type !== "hidden") el.value = state.fields[key];
      if (state.focus && state.focus.key === key) {
        el.focus({ preventScroll: true });
        try { el.setSelectionRange(state.focus.start, state.focus.end); } catch (err) { /* not a text field */ }
      }
    });
    state.open.forEach(function (name) {
      var d = root.querySelector('details[data-keep="' + name + '"]');
      if (d) d.open = true;
    });
    if (state.scroll !== null) window.scrollTo(0, state.scroll);
  }

  document.addEventListener("htmx:beforeSwap", function (e) {
    var target = e.detail && e.detail.target;
    // A poll keeps what is typed. An answer to the operator's own action shows what the server says of the
    // form that was sent, and keeps what was typed elsewhere meanwhile (instructions typed while a claim
    // was on its way).
    var config = e.detail.requestConfig;
    var polled = config && config.verb === "get";
    var answered = !polled && config && config.elt ? (config.elt.form || config.elt.closest("form")) : null;
    var live = target && LIVE_REGIONS.indexOf(target.id) >= 0 && (polled || answered);
    kept = live ? snapshot(target, answered) : null;
    keptId = live ? target.id : null;
  });

  // One action at a time on a live region. Every action's answer replaces the whole region, so a second
  // click while the first is on its way (Resume while the claim is in flight) would race it: the later answer
  // wins and can hide the first one's error. The second one is not sent; the operator is told to try again
  // once the first has landed, and what they typed stays where it is.
  var acting = {};

  function liveAction(e) {
    var cfg = e.detail && e.detail.requestConfig;
    var target = e.detail && e.detail.target;
    if (!cfg || cfg.verb === "get" || !target || LIVE_REGIONS.indexOf(target.id) < 0) return null;
    return target;
  }

  document.addEventListener("htmx:beforeRequest", function (e) {
    var target = liveAction(e);
    if (!target) return;
    var note = document.querySelector('[data-testid="action-in-flight"]');
    if (!acting[target.id]) {
      acting[target.id] = true;
      if (note) note.remove(); // the operator acts again: the note has done its job
      return;
    }
    e.preventDefault();
    if (!note) {
      note = document.createElement("div");
      note.className = "alert alert-warn";
      note.setAttribute("role", "alert");
      note.dataset.testid = "action-in-flight";
      note.innerHTML = '<span></span><button type="button" class="alert-dismiss" data-dismiss ' +
        'aria-label="Dismiss">×</button>';
      var alerts = document.getElementById("wb-alerts");
      if (alerts) alerts.appendChild(note); else target.parentNode.insertBefore(note, target);
    }
    note.querySelector("span").textContent =
      "Your previous action is still on its way: this one was not sent. Try again once the page shows its answer.";
  });

  ["htmx:afterRequest", "htmx:sendAbort", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, function (e) {
      var target = liveAction(e);
      if (target) acting[target.id] = false;
    });
  });

  document.addEventListener("htmx:afterSwap", function () {
    var live = keptId && document.getElementById(keptId);
    if (kept && live) { restore(live, kept); gateAll(live); }
    kept = null; keptId = null;
  });

  document.addEventListener("click", function (e) {
    var dismiss = e.target.closest && e.target.closest("[data-dismiss]");
    if (dismiss) dismiss.parentElement.remove();
    var clamp = e.target.closest && e.target.closest("[data-clamp]");
    if (clamp) clamp.classList.toggle("is-expanded"); // a long agent title: three lines, the rest on a tap
  });

  // Rows picked for a bulk action stay picked through the queue's polls.
  var picked = new Set();

  function showPicked() {
    document.querySelectorAll("input.pick").forEach(function (box) { box.checked = picked.has(box.value); });
    document.querySelectorAll("[data-bulk-count]").forEach(function (el) { el.textContent = picked.size; });
  }

  document.addEventListener("change", function (e) {
    if (!e.target.matches || !e.target.matches("input.pick")) return;
    if (e.target.checked) picked.add(e.target.value); else picked.delete(e.target.value);
    showPicked();
  });

  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.elt && e.detail.elt.id === "bulk-form" && e.detail.successful) { picked.clear(); showPicked(); }
  });

  // New content from htmx: keep the keyboard selection, re-apply the gate, tick at once.
  document.addEventListener("htmx:load", function (e) {
    if (selectedId) {
      var row = document.querySelector('#queue-table tr[data-id="' + selectedId + '"]');
      if (row) select(row, false);
    }
    gateAll(e.target);
    if (picked.size) showPicked();
    tick();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var dialog = help();
    if (dialog) dialog.addEventListener("close", function () {
      // Focus may stay on the hidden Close button, where Enter would not reach the queue.
      if (dialog.contains(document.activeElement)) document.activeElement.blur();
    });
    document.querySelectorAll("#flash .toast").forEach(decorate);
    gateAll(document);
    tick();
    setInterval(tick, 1000);
  });
})();
