// The dashboard's only script (htmx does the rest): keep "updated N s ago" current, pause and
// resume live refresh, the grid's selection shortcuts, and dependent filters. Every page works without it.
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
  // A filter whose choices depend on another (a class's racks, a class's requirements): when that
  // one changes, reset it to "any" rather than submit a value the new choice does not hold (the
  // server would refuse it with a 400 naming it).
  document.addEventListener("change", function (event) {
    var clears = event.target.getAttribute && event.target.getAttribute("data-clears");
    var form = event.target.form;
    if (clears && form && form.elements[clears]) {
      form.elements[clears].value = "";
    }
  });
  // Paused: the live parts' polling requests are cancelled here (a trigger filter such as
  // `every 5s [!window.fleetPaused]` would need eval, which the Content-Security-Policy forbids).
  // Once the session has ended no live part asks again.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var trigger = (event.detail.elt && event.detail.elt.getAttribute("hx-trigger")) || "";
    if (window.fleetSessionEnded || (window.fleetPaused && /^\s*every\b/.test(trigger))) {
      event.preventDefault();
    }
  });
  // A live part whose session ended (the server's 401): keep what the page shows, stop asking, and
  // say so in the banner, whose link signs in again and comes back to this page.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr && event.detail.xhr.status === 401) {
      event.detail.shouldSwap = false;
      event.detail.isError = false;
      window.fleetSessionEnded = true;
      var banner = document.getElementById("session-ended");
      var link = document.getElementById("sign-in-again");
      if (banner && link) {
        // back to this page (not the live part's URL) once signed in; built here, not echoed by the server
        link.href = link.pathname + "?next=" + encodeURIComponent(window.location.pathname + window.location.search);
        banner.hidden = false;
      }
    }
  });
  document.addEventListener("htmx:afterSwap", tickAges);
})();
