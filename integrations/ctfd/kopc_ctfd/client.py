"""client.py - the kopc instance API (docs/api.md) as CTFd's backend calls it:
always with the admin token, never from a browser. Every call is bounded by a
timeout; every refusal becomes a KopcError whose message a player can read
(mapping.plain_error), and the HTTP status kopc gave, for the plugin's own
answer.
"""

from urllib.parse import quote

import requests

from .mapping import UNREACHABLE, plain_error

TIMEOUT = (3, 10)  # connect, read (seconds)


class KopcError(Exception):
    """A refusal or failure of kopc; str() is for players, status for the answer."""

    def __init__(self, message, status=502, code=None):
        super().__init__(message)
        self.status = status
        self.code = code


class KopcClient:
    def __init__(self, url, token, session=None):
        self.url = url.rstrip("/")
        self.token = token
        self.http = session or requests.Session()

    def _call(self, method, path, body=None, ok=(200,)):
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        try:
            r = self.http.request(method, self.url + path, json=body, headers=headers, timeout=TIMEOUT)
        except requests.RequestException as e:
            raise KopcError(UNREACHABLE, 502, "Unreachable") from e
        try:
            parsed = r.json()
        except ValueError:
            parsed = None
        if r.status_code in ok:
            return r.status_code, parsed
        err = parsed.get("error") if isinstance(parsed, dict) else None
        code = err.get("code") if isinstance(err, dict) else None
        status = r.status_code if 400 <= r.status_code < 500 and r.status_code not in (401, 403) else 502
        raise KopcError(plain_error(r.status_code, parsed, r.headers.get("Retry-After")), status, code)

    @staticmethod
    def _path(team, challenge=None, tail=None):
        p = f"/api/v1/teams/{quote(team, safe='')}/instances"
        if challenge is not None:
            p += "/" + quote(challenge, safe="")
        if tail:
            p += "/" + tail
        return p

    def definitions(self):
        """The names of the definitions kopc offers."""
        _, body = self._call("GET", "/api/v1/challenges")
        return {c.get("name") for c in (body or {}).get("challenges", [])}

    def instance(self, team, challenge):
        """The team's Instance of challenge, or None when it has none."""
        try:
            _, body = self._call("GET", self._path(team, challenge))
        except KopcError as e:
            if e.code == "NotFound":
                return None
            raise
        return body

    def instances(self, team):
        _, body = self._call("GET", self._path(team))
        return (body or {}).get("instances", [])

    def start(self, team, challenge):
        _, body = self._call("PUT", self._path(team, challenge), ok=(200, 201))
        return body

    def renew(self, team, challenge):
        _, body = self._call("POST", self._path(team, challenge, "renew"), {})
        return body

    def stop(self, team, challenge):
        """Stops the instance. Returns kopc's answer, the Instance as deleted (state
        Stopping), or None when there was none. Show that answer: a GET right after
        reads kopc's cache, which may not have seen the deletion yet."""
        try:
            _, body = self._call("DELETE", self._path(team, challenge), ok=(202,))
        except KopcError as e:
            if e.code == "NotFound":
                return None
            raise
        return body

    def check_flag(self, team, challenge, flag):
        """kopc's answer to whether flag is the team's flag of challenge (kopc
        compares; it never says the flag): {"correct": bool}, with "sharedFrom"
        when a wrong flag is another team's, "stopped" when a correct one stopped
        the instance (mapping.flag_verdict reads it)."""
        _, body = self._call("POST", self._path(team, challenge, "flag"), {"flag": flag})
        return body if isinstance(body, dict) else {}
