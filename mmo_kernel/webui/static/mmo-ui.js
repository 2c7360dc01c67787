// mmo ui: live fragments over server-sent events, and the controls as fetches.
// Same origin only; no inline code (the content security policy forbids it).
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const topic = document.body.dataset.topic || "list";
  const conn = document.getElementById("conn");

  const terminal = new Set(["completed", "failed", "cancelled", "stopped"]);
  // Which controls make sense now; the server refuses the others anyway.
  const sessionRules = {
    pause: (s) => ["running", "starting", "detached"].includes(s),
    continue: (s) => ["paused", "detached", "suspended"].includes(s),
    stop: (s) => ["running", "starting", "detached", "suspended", "paused"].includes(s),
    cancel: (s) => !terminal.has(s),
  };
  const jobRules = {
    read: (s, r) => r === "unread" || r === "read",
    accept: (s, r) => r === "read",
    reject: (s, r) => r === "read",
    integrate: (s, r, p) => r === "accepted" && p,
    cancel: (s) => !terminal.has(s),
  };

  function applyRules() {
    const head = document.querySelector(".head[data-status]");
    const form = document.querySelector("form.controls");
    if (!head || !form) return;
    const rules = form.dataset.kind === "job" ? jobRules : sessionRules;
    const s = head.dataset.status, r = head.dataset.resultState || "", p = !!head.dataset.patch;
    form.querySelectorAll("button[name=action]").forEach((b) => {
      const rule = rules[b.value];
      b.disabled = rule ? !rule(s, r, p) : false;
    });
  }

  function notice(text, bad) {
    const el = document.getElementById("notice");
    el.textContent = text;
    el.className = "notice " + (bad ? "bad" : "ok");
  }

  function apply(fragments) {
    for (const [id, html] of Object.entries(fragments)) {
      const el = document.getElementById(id);
      if (el && el.innerHTML !== html) el.innerHTML = html;  // server-escaped markup
    }
    applyRules();
  }

  function connect() {
    const source = new EventSource("/events?topic=" + encodeURIComponent(topic));
    source.addEventListener("fragments", (e) => apply(JSON.parse(e.data)));
    source.onopen = () => { conn.textContent = "● live"; conn.className = "conn on"; };
    source.onerror = () => { conn.textContent = "● reconnecting"; conn.className = "conn off"; };
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.classList.contains("controls")) return;
    event.preventDefault();
    const button = event.submitter;
    if (button && button.dataset.confirm && !window.confirm(button.title + "?")) return;
    const data = new FormData(form);
    if (button) data.set("action", button.value);
    try {
      const res = await fetch(form.getAttribute("action"), {
        method: "POST", body: new URLSearchParams(data), credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, "Accept": "application/json" },
      });
      const body = await res.json().catch(() => ({ ok: false, message: res.status + " " + res.statusText }));
      notice(body.message, !body.ok);
      if (body.ok && form.dataset.kind === "job") {
        const reason = form.querySelector("input[name=reason]");
        if (reason) reason.value = "";
      }
    } catch (err) {
      notice("could not reach the server: " + err, true);
    }
  });

  applyRules();
  connect();
})();
