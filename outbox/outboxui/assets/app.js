// Live refresh of the overview: polls the JSON endpoint and writes the
// figures into the page with textContent only (never as markup).
(function () {
  "use strict";
  var root = document.getElementById("overview");
  if (!root) { return; }
  var api = root.getAttribute("data-api");
  var every = Math.max(500, parseInt(root.getAttribute("data-refresh"), 10) || 3000);
  var levels = { ok: true, warn: true, bad: true };
  var updated = document.getElementById("updated");

  function field(card, name) { return card.querySelector('[data-f="' + name + '"]'); }
  function setText(card, name, v) { var el = field(card, name); if (el) { el.textContent = String(v); } }

  function apply(data) {
    var cards = {}, seen = 0;
    root.querySelectorAll("[data-q]").forEach(function (c) { cards[c.getAttribute("data-q")] = c; });
    (data.queues || []).forEach(function (q) {
      var card = cards[q.id];
      if (!card) { document.getElementById("changed").classList.remove("hidden"); return; }
      seen++;
      setText(card, "oldest", q.oldest);
      setText(card, "pending", q.pending);
      setText(card, "leased", q.leased);
      setText(card, "dead", q.dead);
      setText(card, "done", q.done);
      setText(card, "written", q.written);
      setText(card, "error", q.error || "");
      field(card, "error").classList.toggle("hidden", !q.error);
      field(card, "spark").setAttribute("points", q.spark || "");
      if (levels[q.level]) { card.className = "card lvl-" + q.level; }
      var head = field(card, "head");
      head.classList.toggle("hidden", !q.head);
      if (q.head) {
        var link = field(card, "head-link");
        link.textContent = q.head.id;
        link.setAttribute("href", q.head.url);
        setText(card, "head-type", q.head.type);
        setText(card, "head-key", q.head.key);
        setText(card, "head-attempts", q.head.attempts);
        setText(card, "head-error", q.head.last_error);
      }
    });
    if (seen !== Object.keys(cards).length) { document.getElementById("changed").classList.remove("hidden"); }
    updated.textContent = "updated " + new Date().toLocaleTimeString();
    updated.classList.remove("error");
  }

  function poll() {
    fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(apply)
      .catch(function (e) { updated.textContent = "stale: " + e.message; updated.classList.add("error"); })
      .finally(function () { setTimeout(poll, every); });
  }
  setTimeout(poll, every);
})();
