// The dashboard's only script (htmx does the rest): keep "updated N s ago" current, pause and
// resume live refresh, and the grid's selection shortcuts. Every page works without it.
(function () {
  "use strict";
  window.fleetPaused = false;

  function tickAges() {
    document.querySelectorAll("[data-updated]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("data-updated"));
      if (!isNaN(at)) {
        el.textContent = "updated " + Math.max(0, Math.round((Date.now() - at) / 1000)) + " s ago";
      }
    });
  }
  setInterval(tickAges, 1000);

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (target.matches("[data-pause]")) {
      window.fleetPaused = !window.fleetPaused;
      target.textContent = window.fleetPaused ? "resume" : "pause";
      target.setAttribute("aria-pressed", window.fleetPaused ? "true" : "false");
    }
    if (target.matches("[data-select-failing]")) {
      document.querySelectorAll("input[name=device][data-failing]").forEach(function (box) { box.checked = true; });
    }
    if (target.matches("[data-print]")) {
      window.print();
    }
    if (target.matches("[data-back]") && window.history.length > 1) {
      event.preventDefault();
      window.history.back();
    }
    if (target.matches("[data-select-none]")) {
      document.querySelectorAll("input[name=device]").forEach(function (box) { box.checked = false; });
    }
  });
  // Paused: the live parts' polling requests are cancelled here (a trigger filter such as
  // `every 5s [!window.fleetPaused]` would need eval, which the Content-Security-Policy forbids).
  document.addEventListener("htmx:beforeRequest", function (event) {
    var trigger = (event.detail.elt && event.detail.elt.getAttribute("hx-trigger")) || "";
    if (window.fleetPaused && /^\s*every\b/.test(trigger)) {
      event.preventDefault();
    }
  });
  document.addEventListener("htmx:afterSwap", tickAges);
})();
