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

  // A host the gateway commands are built from: it goes into shell and Python
  // text, so only a DNS name is used; anything else is shown as plain text.
  const KOPC_DNS_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;

  function kopcGatewayTarget(e) {
    const port = e.port === undefined || e.port === null ? 443 : e.port;
    if (typeof e.host !== "string" || !KOPC_DNS_NAME.test(e.host)) return null;
    if (!Number.isInteger(port) || port < 1 || port > 65535) return null;
    // A TCP address "<dial>:<port>" naming another than the host: where to
    // connect, the host being the SNI (the operator's --gateway-connect-address).
    let dial = e.host;
    const m = e.type === "TCP" && /^([^:]+):(\d+)$/.exec(String(e.address || ""));
    if (m && Number(m[2]) === port && KOPC_DNS_NAME.test(m[1])) dial = m[1];
    return { host: e.host, port, dial };
  }

  // kopcGatewayCommands: what a player types to reach a TCP instance through
  // the gateway, per tool (the same lines as kopc's own page).
  function kopcGatewayCommands(host, port, dial) {
    if (dial && dial !== host) {
      return [
        ["ncat", "ncat --ssl --ssl-servername " + host + " " + dial + " " + port],
        ["openssl", "openssl s_client -quiet -connect " + dial + ":" + port + " -servername " + host],
        ["pwntools", 'remote("' + dial + '", ' + port + ', ssl=True, sni="' + host + '")'],
      ];
    }
    return [
      ["ncat", "ncat --ssl " + host + " " + port],
      ["openssl", "openssl s_client -quiet -connect " + host + ":" + port + " -servername " + host],
      ["pwntools", 'remote("' + host + '", ' + port + ', ssl=True, sni="' + host + '")'],
    ];
  }

  function kopcLink(url) {
    const a = document.createElement("a");
    a.href = url;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    a.textContent = url;
    return a;
  }

  // kopcCommand: one command line (text only, never HTML) with its Copy button.
  function kopcCommand(tool, cmd) {
    const line = document.createElement("div");
    line.className = "kopc-command d-flex flex-wrap align-items-center gap-2 mb-1";
    if (tool) {
      line.dataset.tool = tool;
      const label = document.createElement("span");
      label.className = "kopc-tool text-muted small";
      label.textContent = tool;
      line.appendChild(label);
    }
    const code = document.createElement("code");
    code.textContent = cmd;
    line.appendChild(code);
    const b = document.createElement("button");
    b.type = "button";
    b.className = "kopc-copy btn btn-outline-secondary btn-sm py-0";
    b.textContent = "Copy";
    b.dataset.copy = cmd;
    b.setAttribute("aria-label", "Copy " + cmd);
    b.addEventListener("click", () => kopcCopy(cmd, b, code));
    line.appendChild(b);
    return line;
  }

  // kopcCopy: to the clipboard, or (no clipboard, e.g. CTFd over plain http)
  // the text selected for Ctrl+C.
  async function kopcCopy(text, button, code) {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents(code);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      button.textContent = "Press Ctrl+C";
    }
    setTimeout(() => {
      button.textContent = "Copy";
    }, 2000);
  }

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

      // Rebuilt only when they change, so a refresh keeps a selection or "Copied".
      const eps = this.q(".kopc-endpoints");
      const sig = JSON.stringify([v.state, v.endpoints || []]);
      if (eps.dataset.sig !== sig) {
        eps.dataset.sig = sig;
        eps.replaceChildren();
        if (v.state === "Running") {
          for (const e of v.endpoints || []) eps.appendChild(this.endpoint(e));
        } else if (v.state === "Starting") {
          eps.textContent = "Starting your instance; the connection details appear once it runs.";
        }
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

    // endpoint: a link for HTTP, a copyable `nc host port` line for TCP; in
    // kopc's gateway mode (the entry has `host`, docs/api.md) the https link
    // for HTTP and, for TCP, the TLS commands with the instance's own host.
    endpoint(e) {
      const row = document.createElement("div");
      row.className = "kopc-endpoint";
      if (e.host !== undefined && e.host !== null) return this.gateway(e, row);
      if (e.type === "HTTP" && /^https?:\/\//.test(e.address || "")) {
        row.appendChild(kopcLink(e.address));
      } else {
        const i = (e.address || "").lastIndexOf(":");
        const cmd = i > 0 ? "nc " + e.address.slice(0, i) + " " + e.address.slice(i + 1) : e.address || "";
        row.appendChild(kopcCommand(null, cmd));
      }
      return row;
    }

    gateway(e, row) {
      const t = kopcGatewayTarget(e);
      row.classList.add("kopc-gateway");
      if (!t) {
        const code = document.createElement("code");
        code.textContent = String(e.address || e.host);
        row.appendChild(code);
        return row;
      }
      row.dataset.host = t.host;
      if (e.type === "HTTP") {
        row.appendChild(kopcLink("https://" + t.host + (t.port === 443 ? "" : ":" + t.port)));
        return row;
      }
      const hint = document.createElement("div");
      hint.className = "text-muted small";
      hint.textContent = "TLS on port " + t.port + ", with any of:";
      row.appendChild(hint);
      for (const [tool, cmd] of kopcGatewayCommands(t.host, t.port, t.dial)) row.appendChild(kopcCommand(tool, cmd));
      return row;
    }
  }
})();
