// Memory Portal's small behaviours, progressive only (every action also works without it):
// toasts from htmx responses, keyboard shortcuts on the review queue, bulk selection, the
// typed reset confirmation, the inline action panels and copy buttons. Served from the app
// (CSP: no inline).
(function () {
  "use strict";

  // --- Toasts: the server sends HX-Trigger {"toast": {level, message, hint, undo, link}} ------
  function toast(detail) {
    var box = document.getElementById("toasts");
    if (!box || !detail || !detail.message) return;
    var level = detail.level || "info";
    var el = document.createElement("div");
    el.className = "toast " + level;
    el.setAttribute("role", level === "error" ? "alert" : "status");
    var message = document.createElement("p");
    message.textContent = detail.message;
    el.appendChild(message);
    if (detail.hint) {
      var hint = document.createElement("p");
      hint.className = "hint";
      hint.textContent = detail.hint;
      el.appendChild(hint);
    }
    if (detail.undo && detail.undo.url && window.htmx) {
      var undo = document.createElement("button");
      undo.type = "button";
      undo.className = "btn toast-undo";
      undo.textContent = detail.undo.label || "Undo";
      undo.addEventListener("click", function () {
        undo.disabled = true;
        undoFromToast(detail.undo, el);
      });
      el.appendChild(undo);
    }
    if (detail.link && detail.link.url) {
      // Where the change reached (a veto's runs): a plain link, it changes nothing.
      var link = document.createElement("a");
      link.className = "btn toast-link";
      link.href = detail.link.url;
      link.textContent = detail.link.label || "Open";
      el.appendChild(link);
    }
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", function () { el.remove(); });
    el.appendChild(close);
    // One toast at a time: the newest replaces the one before (its change is on the page; an
    // Undo still wanted is the row's own button, or the note's page).
    box.replaceChildren(el);
    // Errors and toasts with Undo stay longer; none leaves while the pointer or the focus
    // is on it (the time to read and act is the person's).
    var wait = detail.undo || detail.link || level === "error" || level === "warning" ? 15000 : 5000;
    var timer = null;
    function leaveLater() {
      timer = window.setTimeout(function () {
        el.classList.add("leaving");
        window.setTimeout(function () { el.remove(); }, 400);
      }, wait);
    }
    function stay() { window.clearTimeout(timer); }
    el.addEventListener("mouseenter", stay);
    el.addEventListener("focusin", stay);
    el.addEventListener("mouseleave", leaveLater);
    el.addEventListener("focusout", leaveLater);
    leaveLater();
  }
  window.memoryPortalToast = toast;

  // The toast's Undo: the same POST as the row's own button. The answer's rows come out of
  // band, in place of their rows; on a page the row has left (the review queue), the page is
  // drawn again so the note is back where it belongs.
  function undoFromToast(undo, el) {
    var url = undo.url;
    var values = Object.assign({ next: window.location.pathname + window.location.search }, undo.values || {});
    var ids = values.ids || [(url.split("/notes/")[1] || "").split("/")[0]];
    var inPlace = ids.some(function (id) { return id && document.getElementById("note-" + id); });
    if (inPlace) values.oob = "1";
    window.htmx.ajax("POST", url, { source: document.body, swap: "none", values: values })
      .then(function () {
        el.remove();
        if (!inPlace) window.location.reload();
      });
  }

  document.addEventListener("toast", function (event) { toast(event.detail); });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : "";
    var message = status === 403
      ? "Refused (403). Your session may have expired: reload the page."
      : status === 503
        ? "Busy for a moment: nothing was changed. Try again in a few seconds."
        : "The server could not complete this action (" + status + "). Reload and try again.";
    toast({ level: "error", message: message });
  });
  document.addEventListener("htmx:sendError", function () {
    toast({ level: "error", message: "Network error: the action was not sent. Try again." });
  });

  // --- Keyboard shortcuts on a [data-shortcuts] page (the review queue, the notes table):
  // j / k move, a / r / v act, Enter opens the note, ? lists the keys ------------------------
  var current = -1;

  function shortcutRows() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-shortcuts] tr.note-row"));
  }

  function highlight(index) {
    var rows = shortcutRows();
    if (!rows.length) return;
    current = Math.max(0, Math.min(index, rows.length - 1));
    rows.forEach(function (row) { row.classList.remove("is-current"); row.removeAttribute("aria-current"); });
    var row = rows[current];
    row.classList.add("is-current");
    row.setAttribute("aria-current", "true");
    row.scrollIntoView({ block: "nearest" });
    return row;
  }

  // Focus follows the work: after a row action (the row swapped, or gone from its section)
  // and after a panel closes, the row at the same place — the next note — has the focus.
  function focusRow(index) {
    var row = highlight(index);
    if (!row) return;
    if (!row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
    row.focus({ preventScroll: true });
  }

  var acting = null; // the row whose action is on its way (the answer's main target)
  document.addEventListener("htmx:beforeRequest", function (event) {
    var row = event.target.closest && event.target.closest("tr.note-row");
    var rows = shortcutRows();
    acting = null;
    if (row && rows.indexOf(row) >= 0) {
      current = rows.indexOf(row);
      acting = row;
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    // The row's own answer only, not the out-of-band parts (counters, other rows).
    if (!acting || !event.detail || event.detail.target !== acting) return;
    var id = acting.id;
    acting = null;
    if (current < 0 || !shortcutRows().length) return;
    // Still on the page (redrawn in place): on to the next note; gone from its section (the
    // review queue): the next note has taken its place.
    focusRow(document.getElementById(id) ? current + 1 : current);
  });

  function keysDialog() {
    var dialog = document.getElementById("keys-dialog");
    if (dialog && typeof dialog.showModal === "function") dialog.showModal();
  }

  // Enter opens the highlighted note when the focus is on the page or a row, not a control.
  function onPage(target) {
    return target === document.body || (target.matches && target.matches("tr.note-row"));
  }

  function typing(target) {
    return target && target.closest && target.closest("input, textarea, select, [contenteditable]");
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      var open = document.querySelectorAll("details.popover[open]");
      open.forEach(function (d) { d.open = false; });
      if (open.length && current >= 0) focusRow(current);
      return;
    }
    if (!document.querySelector("[data-shortcuts]")) return;
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    // j / k move the focus with the highlight: Enter then opens that note.
    if (key === "j") {
      focusRow(current + 1);
      event.preventDefault();
    } else if (key === "k") {
      focusRow(current < 0 ? 0 : current - 1);
      event.preventDefault();
    } else if (key === "?") {
      keysDialog();
      event.preventDefault();
    } else if (key === "Enter" && current >= 0 && onPage(event.target)) {
      var link = shortcutRows()[current] && shortcutRows()[current].querySelector("td.c-id a");
      if (link) {
        window.location.href = withOrigin(link.getAttribute("href"));
        event.preventDefault();
      }
    } else if (key === "x") {
      // Tick (or untick) the highlighted note for a bulk action.
      var picked = shortcutRows()[current];
      var box = picked && picked.querySelector('input[name="ids"][form="bulk-form"]');
      if (!picked) {
        toast({ level: "info", message: "Press j to pick a note first." });
      } else if (box) {
        box.checked = !box.checked;
        lastBox = box;
        box.dispatchEvent(new Event("change", { bubbles: true }));
      }
      event.preventDefault();
    } else if (key === "a" || key === "r" || key === "v") {
      var rows = shortcutRows();
      if (current < 0 || !rows[current]) {
        toast({ level: "info", message: "Press j to pick a note first." });
        return;
      }
      var button = rows[current].querySelector('button[aria-keyshortcuts="' + key + '"]');
      if (button) {
        button.click();
      } else {
        toast({ level: "info", message: "That action is not offered for this note." });
      }
      event.preventDefault();
    }
  });

  // A note opened from a list knows the list (`from`: its path and query): its page steps to
  // the list's previous and next notes. Set as the link is pressed, so a new tab has it too.
  function withOrigin(href) {
    var url = new URL(href, window.location.href);
    url.searchParams.set("from", window.location.pathname + window.location.search);
    return url.pathname + url.search + url.hash;
  }
  function markOrigin(event) {
    var link = event.target.closest && event.target.closest("[data-shortcuts] td.c-id a");
    if (link) link.setAttribute("href", withOrigin(link.getAttribute("href")));
  }
  document.addEventListener("mousedown", markOrigin, true);
  document.addEventListener("click", markOrigin, true);

  // On a note page opened from a list: j / k step to the next / previous note, a / r / v
  // decide (the page then shows the next note), ? lists the keys.
  document.addEventListener("keydown", function (event) {
    var steps = document.querySelector("[data-note-steps]");
    if (!steps || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var target = null;
    if (event.key === "j") target = steps.querySelector('a[rel="next"]');
    else if (event.key === "k") target = steps.querySelector('a[rel="prev"]');
    else if (event.key === "a" || event.key === "r" || event.key === "v") {
      target = steps.querySelector('.actions button[aria-keyshortcuts="' + event.key + '"]');
    } else if (event.key === "?") {
      keysDialog();
      event.preventDefault();
      return;
    }
    if (target) {
      target.click();
      event.preventDefault();
    }
  });

  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest("[data-shortcuts] tr.note-row");
    if (row) {
      var index = shortcutRows().indexOf(row);
      if (index >= 0) highlight(index);
    }
  });

  // --- Bulk selection -------------------------------------------------------------------------
  function updateBulkCount() {
    var boxes = document.querySelectorAll('input[name="ids"][form="bulk-form"]');
    var selected = 0;
    boxes.forEach(function (box) { if (box.checked) selected += 1; });
    document.querySelectorAll("[data-bulk-count]").forEach(function (el) {
      el.textContent = selected
        ? selected + " selected"
        : "Select notes for a bulk action";
      el.classList.toggle("is-empty", !selected);
    });
  }

  // Who was served the selected notes in the last 30 days (the blast radius of a bulk veto,
  // reject or forget): asked of the server once the selection settles, shown in the bar.
  function selectedIds() {
    var ids = [];
    document.querySelectorAll('input[name="ids"][form="bulk-form"]:checked').forEach(function (box) {
      ids.push(box.value);
    });
    return ids;
  }

  function reachOf(ids) {
    var form = document.getElementById("bulk-form");
    var none = { runs: 0, said: "" };
    if (!form || !form.dataset.reachUrl || !ids.length || !window.fetch) return Promise.resolve(none);
    var query = ids.map(function (id) { return "ids=" + encodeURIComponent(id); }).join("&");
    return window.fetch(form.dataset.reachUrl + "?" + query, { credentials: "same-origin" })
      .then(function (answer) { return answer.ok ? answer.json() : none; })
      .catch(function () { return none; });
  }

  var reachTimer = null;
  function updateBulkReach() {
    var said = document.querySelector("[data-bulk-reach-said]");
    if (!said) return;
    window.clearTimeout(reachTimer);
    var ids = selectedIds();
    if (!ids.length) {
      said.textContent = "";
      return;
    }
    reachTimer = window.setTimeout(function () {
      reachOf(ids).then(function (reach) {
        if (selectedIds().join(" ") === ids.join(" ")) said.textContent = reach.said;
      });
    }, 250);
  }

  // Shift-click ticks (or unticks) every note between the last box ticked and this one.
  var lastBox = null;
  document.addEventListener("click", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches('input[name="ids"][form="bulk-form"]')) return;
    if (event.shiftKey && lastBox && lastBox !== box && document.contains(lastBox)) {
      var boxes = Array.prototype.slice.call(
        document.querySelectorAll('input[name="ids"][form="bulk-form"]'));
      var from = boxes.indexOf(lastBox), to = boxes.indexOf(box);
      if (from >= 0 && to >= 0) {
        boxes.slice(Math.min(from, to), Math.max(from, to) + 1).forEach(function (other) {
          other.checked = box.checked;
        });
        updateBulkCount();
        updateBulkReach();
      }
    }
    lastBox = box;
  });

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("[data-select-all]")) {
      // The table's header box selects its rows; the bulk bar's (phones) every row on the page.
      var scope = target.closest("table") || document;
      scope.querySelectorAll('input[name="ids"][form="bulk-form"]').forEach(function (box) {
        box.checked = target.checked;
      });
    }
    if (target.matches('[data-select-all], input[name="ids"]')) {
      updateBulkCount();
      updateBulkReach();
    }
  });

  // A bulk veto or forget asks first, naming how many notes it changes and who was served
  // them in the last 30 days; a bulk reject asks only when someone was.
  document.addEventListener("htmx:confirm", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("[data-bulk-confirm]")) return;
    var verb = form.querySelector('[name="action"]').value;
    var asks = form.getAttribute("data-bulk-confirm").split(" ").indexOf(verb) >= 0;
    var reaches = (form.getAttribute("data-bulk-reach") || "").split(" ").indexOf(verb) >= 0;
    var ids = selectedIds();
    if (!ids.length || !(asks || reaches)) return;
    event.preventDefault();
    var what = ids.length === 1 ? "1 note" : ids.length + " notes";
    var question = {
      veto: "Veto " + what + "? Agents stop being served them; the toast's Undo brings them back.",
      forget: "Forget " + what + "? They are hidden from agents and kept as recoveries; the toast's Undo restores them.",
      reject: "Reject " + what + "? Agents stop being served them."
    }[verb];
    (reaches ? reachOf(ids) : Promise.resolve({ runs: 0 })).then(function (reach) {
      if (!asks && !reach.runs) {
        event.detail.issueRequest(true);
        return;
      }
      if (window.confirm(reach.runs ? question + "\n\n" + reach.said : question)) {
        event.detail.issueRequest(true);
      }
    });
  });

  // --- The reset button waits for the typed project id ---------------------------------------
  function syncConfirm(input) {
    var button = input.form && input.form.querySelector("[data-confirm-target]");
    if (button) button.disabled = input.value.trim() !== input.dataset.confirmValue;
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches("[data-confirm-value]")) syncConfirm(event.target);
  });

  // --- Row actions: each button names its URL once (formaction) ------------------------------
  // Without JavaScript a click posts the page's #row-actions form (CSRF, next) to it; here the
  // same form goes there with htmx (the button's name and value too) and the row is swapped
  // for the answer (templates/jinja2/dashboard/note_rows.html).
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest('button[form="row-actions"][formaction]');
    if (!button || !window.htmx || button.disabled) return;
    event.preventDefault();
    var row = button.closest("tr");
    window.htmx.ajax("POST", button.getAttribute("formaction"), {
      source: button,
      target: row || document.body,
      swap: row ? "outerHTML" : "none",
    });
  });

  // --- Inline action panels (edit, archive): one open at a time, focus the field -------------
  // A row's "More" is a link to the note's page (a[data-panel]), the way without JavaScript.
  // Clicked here, it becomes a popover (details > summary[data-panel] + .panel-slot), opened
  // and loaded from that URL plus "<verb>/form/"; a click with a modifier still opens the page.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[data-panel]");
    if (!link || !window.htmx || event.button || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    var details = document.createElement("details");
    details.className = "popover";
    details.dataset.url = link.getAttribute("href");
    var summary = document.createElement("summary");
    summary.className = "btn";
    summary.textContent = link.textContent;
    summary.dataset.panel = link.dataset.panel;
    if (link.dataset.section) summary.dataset.section = link.dataset.section;
    var slot = document.createElement("div");
    slot.className = "panel-slot";
    details.append(summary, slot);
    link.replaceWith(details);
    summary.focus();
    details.open = true;
  });

  function loadPanel(details) {
    var summary = details.querySelector("summary[data-panel]");
    var slot = details.querySelector(".panel-slot");
    if (!summary || !slot || !details.dataset.url || details.dataset.loaded || !window.htmx) return;
    details.dataset.loaded = "true";
    var url = details.dataset.url + summary.dataset.panel + "/form/";
    if (summary.dataset.section) url += "?section=" + encodeURIComponent(summary.dataset.section);
    window.htmx.ajax("GET", url, { source: summary, target: slot, swap: "innerHTML" });
  }

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details.popover") || !details.open) return;
    document.querySelectorAll("details.popover[open]").forEach(function (other) {
      if (other !== details) other.open = false;
    });
    loadPanel(details);
    var field = details.querySelector("textarea, input[type=text]");
    if (field) field.focus();
  }, true);

  // A panel is loaded when first opened: its field takes the focus once it is in.
  document.addEventListener("htmx:afterSwap", function (event) {
    var slot = event.detail && event.detail.target;
    if (!slot || !slot.matches || !slot.matches(".panel-slot")) return;
    var details = slot.closest("details.popover");
    var field = slot.querySelector("textarea, input[type=text]");
    if (details && details.open && field) field.focus();
  });

  // --- Connect: the new agent's fields only while "A new agent…" is picked --------------------
  // (fieldset[data-new-agent] holds that choice's value; without JavaScript all are shown.)
  function syncNewAgent(set) {
    var agent = set.form && set.form.elements.agent;
    if (agent) set.hidden = agent.value !== set.dataset.newAgent;
  }
  document.addEventListener("change", function (event) {
    var form = event.target.form;
    var set = form && event.target.name === "agent" && form.querySelector("[data-new-agent]");
    if (!set) return;
    syncNewAgent(set);
    if (!set.hidden && form.elements.name) form.elements.name.focus();
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-new-agent]").forEach(syncNewAgent);
  });

  // --- After every page load or htmx swap ----------------------------------------------------
  function refresh() {
    document.querySelectorAll("[data-confirm-value]").forEach(syncConfirm);
    updateBulkCount();
    updateBulkReach();
    if (current >= 0) {
      var rows = shortcutRows();
      if (rows[current]) rows[current].classList.add("is-current");
    }
  }

  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("[data-select-all]").forEach(function (box) { box.checked = false; });
    refresh();
  });
  // --- Import: the file sent, then the server's phases (one JSON object a line) on the bar ---
  function importProgress(form, url) {
    var box = document.getElementById("import-progress");
    var report = document.getElementById("import-report");
    if (!box || !report || !window.XMLHttpRequest || !window.FormData) return false;
    var bar = box.querySelector("progress");
    var label = box.querySelector("p");
    var buttons = document.querySelectorAll("[data-import-form] button, [data-import-run]");
    function set(value, text) {
      bar.value = Math.round(value);
      label.textContent = text;
    }
    function show(html) {
      report.innerHTML = html;
      if (window.htmx) window.htmx.process(report);
      var heading = report.querySelector("h2");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
    }
    function finish() {
      buttons.forEach(function (b) { b.disabled = false; });
    }
    function onEvent(e) {
      if (e.phase === "checked") {
        set(25, "Checked " + e.lines.toLocaleString() + " lines" +
          (e.vectors ? "; computing the vectors of " + e.vectors.toLocaleString() + " notes…" : "; writing…"));
      } else if (e.phase === "vectors") {
        set(25 + 65 * e.done / e.total, "Vectors: " + e.done.toLocaleString() + " of " + e.total.toLocaleString() + " notes");
      } else if (e.phase === "writing") {
        set(92, "Writing, in one transaction…");
      } else if (e.phase === "done") {
        set(100, "Imported.");
        show(e.html);
      } else if (e.phase === "failed") {
        set(bar.value, "Nothing was imported.");
        show(e.html);
      }
    }
    var seen = 0;
    function read(xhr) {
      if ((xhr.getResponseHeader("Content-Type") || "").indexOf("application/x-ndjson") !== 0) return;
      var text = xhr.responseText;
      var end = text.lastIndexOf("\n");
      if (end < seen) return;
      text.slice(seen, end).split("\n").forEach(function (line) {
        if (line.trim()) onEvent(JSON.parse(line));
      });
      seen = end + 1;
    }
    var xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    xhr.setRequestHeader("X-Import-Progress", "ndjson");
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) set(20 * e.loaded / e.total, "Sending the file: " + Math.round(100 * e.loaded / e.total) + "%");
    });
    xhr.addEventListener("progress", function () { read(xhr); });
    xhr.addEventListener("load", function () {
      read(xhr);
      if ((xhr.getResponseHeader("Content-Type") || "").indexOf("text/html") === 0) {
        box.hidden = true; // refused before the import began: the report says why
        show(xhr.responseText);
      }
      finish();
    });
    xhr.addEventListener("error", function () {
      set(bar.value, "The connection was lost.");
      toast({ level: "error", message: "Network error: the import's answer did not arrive. Check the project before importing again (importing twice changes nothing)." });
      finish();
    });
    buttons.forEach(function (b) { b.disabled = true; });
    box.hidden = false;
    set(0, "Sending the file…");
    report.innerHTML = "";
    xhr.send(new FormData(form));
    return true;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    if (!form.matches("[data-import-form]") || !button || !button.hasAttribute("data-import-run")) return;
    if (importProgress(form, button.formAction)) event.preventDefault();
  });

  // --- Copy buttons: [data-copy="element id"] copies that element's text ------------------
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent).then(function () {
      var label = button.textContent;
      button.textContent = "Copied";
      window.setTimeout(function () { button.textContent = label; }, 1500);
    }, function () {
      toast({ level: "error", message: "Copying was refused by the browser: select the text and copy it." });
    });
  });
})();
