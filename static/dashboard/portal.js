// Memory Portal's small behaviours, progressive only (every action also works without it):
// toasts from htmx responses, keyboard shortcuts on the review queue, bulk selection, the
// typed reset confirmation, the inline action panels and copy buttons. Served from the app
// (CSP: no inline).
(function () {
  "use strict";

  // --- Toasts: the server sends HX-Trigger {"toast": {level, message, hint}} ----------------
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
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", function () { el.remove(); });
    el.appendChild(close);
    box.appendChild(el);
    while (box.children.length > 4) box.firstElementChild.remove();
    window.setTimeout(function () {
      el.classList.add("leaving");
      window.setTimeout(function () { el.remove(); }, 400);
    }, level === "error" || level === "warning" ? 10000 : 5000);
  }
  window.memoryPortalToast = toast;

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

  // --- Keyboard shortcuts on a [data-shortcuts] page: j / k move, a / r / v act ------------
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
  }

  function typing(target) {
    return target && target.closest && target.closest("input, textarea, select, [contenteditable]");
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      document.querySelectorAll("details.popover[open]").forEach(function (d) { d.open = false; });
      return;
    }
    if (!document.querySelector("[data-shortcuts]")) return;
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    var key = event.key;
    if (key === "j") {
      highlight(current + 1);
      event.preventDefault();
    } else if (key === "k") {
      highlight(current < 0 ? 0 : current - 1);
      event.preventDefault();
    } else if (key === "a" || key === "r" || key === "v") {
      var rows = shortcutRows();
      if (current < 0 || !rows[current]) {
        toast({ level: "info", message: "Press j to pick a note first." });
        return;
      }
      var button = rows[current].querySelector('[data-shortcut="' + key + '"]');
      if (button) {
        button.click();
      } else {
        toast({ level: "info", message: "That action is not offered for this note." });
      }
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
    });
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("[data-select-all]")) {
      target.closest("table").querySelectorAll('input[name="ids"]').forEach(function (box) {
        box.checked = target.checked;
      });
    }
    if (target.matches('[data-select-all], input[name="ids"]')) updateBulkCount();
  });

  // --- The reset button waits for the typed project id ---------------------------------------
  function syncConfirm(input) {
    var button = input.form && input.form.querySelector("[data-confirm-target]");
    if (button) button.disabled = input.value.trim() !== input.dataset.confirmValue;
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches("[data-confirm-value]")) syncConfirm(event.target);
  });

  // --- Inline action panels (edit, archive): one open at a time, focus the field -------------
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details.popover") || !details.open) return;
    document.querySelectorAll("details.popover[open]").forEach(function (other) {
      if (other !== details) other.open = false;
    });
    var field = details.querySelector("textarea, input[type=text]");
    if (field) field.focus();
  }, true);

  // --- After every page load or htmx swap ----------------------------------------------------
  function refresh() {
    document.querySelectorAll("[data-confirm-value]").forEach(syncConfirm);
    updateBulkCount();
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
