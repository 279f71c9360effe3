"""The development sign-in form ``/authorize`` shows: a subject and a role, no password (the
provider hands a token to whoever asks). The client's request travels in hidden fields and is
checked again when the form comes back."""

from __future__ import annotations

from html import escape

from identity_provider.authorization import ROLES, AuthorizationRequest

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in (development identity provider)</title>
<style>body{{font-family:sans-serif;max-width:28rem;margin:4rem auto;color:#222}}
label{{display:block;margin:.8rem 0 .2rem}}input,select,button{{font-size:1rem;padding:.3rem}}
.note{{color:#a40;font-size:.9rem}}.error{{color:#b00}}</style></head>
<body><h1>Sign in</h1>
<p class="note">Development identity provider: it signs in whoever asks, with the role chosen.
Never reachable from outside the machine.</p>
<p>For <strong>{client_id}</strong></p>{error}
<form method="post" action="/authorize">
<label for="subject">Subject</label>
<input id="subject" name="subject" required maxlength="100" autofocus value="{subject}">
<label for="role">Role</label>
<select id="role" name="role">{options}</select>
{hidden}
<p><button id="sign-in" type="submit">Sign in</button></p>
</form></body></html>"""


def render(request: AuthorizationRequest, *, subject: str = "", error: str | None = None) -> str:
    hidden = {"response_type": "code", "client_id": request.client_id,
              "redirect_uri": request.redirect_uri, "code_challenge": request.code_challenge,
              "code_challenge_method": "S256", "state": request.state, "scope": request.scope}
    return _PAGE.format(
        client_id=escape(request.client_id), subject=escape(subject),
        error=f'<p class="error">{escape(error)}</p>' if error else "",
        options="".join(f'<option value="{r}">{r}</option>' for r in reversed(ROLES)),
        hidden="\n".join(f'<input type="hidden" name="{name}" value="{escape(value)}">'
                         for name, value in hidden.items() if value is not None))
