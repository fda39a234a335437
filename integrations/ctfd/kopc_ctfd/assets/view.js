// view.js - the kopc instance panel in a challenge's window (view.html).
//
// Everything the panel shows comes from the plugin's routes, which ask kopc
// (whose cache is the truth), so a reload, a second tab or a teammate's click
// all show the same instance. While the instance starts or stops the panel
// asks every 2 s, otherwise every 15 s; the expiry counts down in between.
// It stops asking once the window is closed (its element leaves the page).
// CTFd loads this file again for every window it opens: hence one closure.
(function () {
  "use strict";

  CTFd._internal.challenge.data = undefined;
  CTFd._internal.challenge.renderer = null; // CTFd 3 still reads these two
  CTFd._internal.challenge.preRender = function () {};
  CTFd._internal.challenge.render = null;

  CTFd._internal.challenge.postRender = function () {
    kopcMount(0);
  };

  CTFd._internal.challenge.submit = function (preview) {
    const challenge_id = parseInt(CTFd.lib.$("#challenge-id").val());
    const submission = CTFd.lib.$("#challenge-input").val();
    const params = preview ? { preview: true } : {};
    return CTFd.api.post_challenge_attempt(params, { challenge_id, submission });
  };

  const KOPC_FAST_MS = 2000;
  const KOPC_SLOW_MS = 15000;
  const KOPC_LABELS = {
    Stopped: ["Not running", "bg-secondary"],
    Starting: ["Starting", "bg-info"],
    Running: ["Running", "bg-success"],
    Error: ["Error", "bg-danger"],
    Stopping: ["Stopping", "bg-warning"],
  };

  // kopcMount waits for the window's HTML (inserted after postRender) and starts the panel.
  function kopcMount(tries) {
    const el = document.getElementById("kopc-instance");
    if (!el || el.dataset.mounted) {
      if (!el && tries < 200) setTimeout(() => kopcMount(tries + 1), 50);
      return;
    }
    el.dataset.mounted = "1";
    new KopcPanel(el).start();
  }

  class KopcPanel {
    constructor(el) {
      this.el = el;
      this.path = "/plugins/kopc_ctfd/api/instances/" + el.dataset.challengeId;
      this.view = null;
      this.fetchedAt = 0;
      this.timer = null;
      this.busy = false;
      this.q = (sel) => el.querySelector(sel);
    }

    start() {
      this.q(".kopc-start").addEventListener("click", () => this.act("PUT", ""));
      this.q(".kopc-extend").addEventListener("click", () => this.act("POST", "/renew"));
      this.q(".kopc-stop").addEventListener("click", () => this.act("DELETE", ""));
      this.ticker = setInterval(() => this.tick(), 1000);
      this.refresh();
    }

    alive() {
      if (document.body.contains(this.el)) return true;
      clearInterval(this.ticker);
      clearTimeout(this.timer);
      return false;
    }

    async call(method, suffix) {
      const init = { method, credentials: "same-origin", headers: {} };
      if (method !== "GET") init.body = "{}";
      let r, body;
      try {
        r = await CTFd.fetch(this.path + suffix, init);
        body = await r.json();
      } catch (e) {
        return { ok: false, error: "CTFd cannot be reached; check your connection." };
      }
      if (!r.ok || !body.success) {
        return { ok: false, error: (body && body.error) || "The request failed (" + r.status + ")." };
      }
      return { ok: true, view: body.data, error: body.error };
    }

    async refresh() {
      if (!this.alive()) return;
      const res = await this.call("GET", "");
      this.show(res);
      this.schedule();
    }

    async act(method, suffix) {
      if (this.busy) return;
      this.busy = true;
      this.render();
      const res = await this.call(method, suffix);
      this.busy = false;
      this.show(res);
      this.schedule();
    }

    schedule() {
      clearTimeout(this.timer);
      if (!this.alive()) return;
      const state = this.view && this.view.state;
      const fast = state === "Starting" || state === "Stopping";
      this.timer = setTimeout(() => this.refresh(), fast ? KOPC_FAST_MS : KOPC_SLOW_MS);
    }

    show(res) {
      if (res.view) {
        this.view = res.view;
        this.fetchedAt = Date.now();
      }
      this.error = res.error || null;
      this.render();
    }

    secondsLeft() {
      const v = this.view;
      if (!v || v.secondsLeft == null) return null;
      return Math.max(0, v.secondsLeft - Math.floor((Date.now() - this.fetchedAt) / 1000));
    }

    tick() {
      if (this.alive()) this.renderExpiry();
    }

    renderExpiry() {
      const left = this.secondsLeft();
      const box = this.q(".kopc-expiry");
      if (left == null || !this.view || this.view.state === "Stopped") {
        box.textContent = "";
        return;
      }
      const m = Math.floor(left / 60);
      const s = String(left % 60).padStart(2, "0");
      box.textContent = "Expires in " + m + ":" + s + (this.view.renewable ? "" : " (cannot be extended further)");
    }

    render() {
      const v = this.view || { state: "Loading", endpoints: [] };
      const [label, cls] = KOPC_LABELS[v.state] || ["Loading", "bg-secondary"];
      const badge = this.q(".kopc-state");
      badge.textContent = label;
      badge.className = "kopc-state badge " + cls;
      badge.dataset.state = v.state;

      const eps = this.q(".kopc-endpoints");
      eps.replaceChildren();
      if (v.state === "Running") {
        for (const e of v.endpoints || []) eps.appendChild(this.endpoint(e));
      } else if (v.state === "Starting") {
        eps.textContent = "Starting your instance; the connection details appear once it runs.";
      }
      this.renderExpiry();

      const err = this.q(".kopc-error");
      err.textContent = this.error || "";
      err.classList.toggle("d-none", !this.error);

      const live = v.state === "Starting" || v.state === "Running" || v.state === "Error";
      this.toggle(".kopc-start", v.state === "Stopped");
      this.toggle(".kopc-extend", (v.state === "Starting" || v.state === "Running") && v.renewable);
      this.toggle(".kopc-stop", live);
    }

    toggle(sel, shown) {
      const b = this.q(sel);
      b.classList.toggle("d-none", !shown);
      b.disabled = this.busy;
    }

    // endpoint: a link for HTTP, a copyable `nc host port` line for TCP.
    endpoint(e) {
      const row = document.createElement("div");
      row.className = "kopc-endpoint";
      if (e.type === "HTTP" && /^https?:\/\//.test(e.address || "")) {
        const a = document.createElement("a");
        a.href = e.address;
        a.target = "_blank";
        a.rel = "noopener";
        a.textContent = e.address;
        row.appendChild(a);
      } else {
        const code = document.createElement("code");
        const i = (e.address || "").lastIndexOf(":");
        code.textContent = i > 0 ? "nc " + e.address.slice(0, i) + " " + e.address.slice(i + 1) : e.address || "";
        row.appendChild(code);
      }
      return row;
    }
  }
})();
