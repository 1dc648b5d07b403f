// The workflow page: "Expand all" opens (or closes) every collapsed input and output of a panel.
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-toggle-details]");
    if (!button) return;
    var root = document.querySelector(button.getAttribute("data-toggle-details"));
    if (!root) return;
    var open = button.getAttribute("aria-pressed") !== "true";
    root.querySelectorAll("details").forEach(function (d) { d.open = open; });
    button.setAttribute("aria-pressed", open ? "true" : "false");
    button.textContent = open ? "Collapse all" : "Expand all";
  });
})();
