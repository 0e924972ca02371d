# Warren's `desktop` template (sourced by scripts/build-base.sh): the base plus an X desktop that
# @e2b/desktop drives unchanged and Warren's native desktop API uses: Xvfb, a minimal XFCE (the
# SDK's readiness check names xfce4-session, xfwm4 and xfdesktop), xdotool, scrot, xrandr,
# x11vnc + noVNC (/opt/noVNC, as E2B's template has it), xfce4-terminal and Debian's Chromium.
# Passive: no start command; the SDK, or POST /v1/sandboxes/{id}/desktop/start, starts the X
# server and the session. See docs/desktop.md.

PROFILE_PACKAGES=xvfb,x11-utils,x11-xserver-utils,xauth,xfce4-session,xfwm4,xfdesktop4,xfce4-settings,xfconf,dbus-x11,x11vnc,novnc,websockify,xdotool,scrot,net-tools,xdg-utils,libgtk-3-bin,xfce4-terminal,chromium,fonts-dejavu-core

PROFILE_CHECKS='command -v Xvfb xdpyinfo xrandr xauth startxfce4 xfce4-session xfwm4 xfdesktop dbus-launch
command -v x11vnc websockify xdotool scrot netstat xdg-open gtk-launch xfce4-terminal chromium
test -x /opt/noVNC/utils/novnc_proxy && test -r /opt/noVNC/vnc.html
xdotool --version
test -r /etc/chromium/policies/managed/warren.json && test -r /etc/chromium.d/warren'

profile_customize() {
    r=$1
    # @e2b/desktop runs `cd /opt/noVNC/utils && ./novnc_proxy ... --web /opt/noVNC`.
    ln -sfn /usr/share/novnc "$r/opt/noVNC"

    # Chromium must not phone home (and a sandbox has no internet by default anyway): flags that
    # Debian's /usr/bin/chromium wrapper reads from /etc/chromium.d/, and managed policies. The
    # browser's own sandbox needs user namespaces, which a Warren sandbox forbids (seccomp):
    # --no-sandbox; the sandbox around the browser is Warren's.
    cat >"$r/etc/chromium.d/warren" <<'EOF'
# Warren desktop template: no background traffic, no first-run UI; Warren is the sandbox.
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --no-first-run --no-default-browser-check --disable-background-networking --disable-component-update --disable-sync --disable-default-apps --disable-breakpad --disable-domain-reliability --disable-client-side-phishing-detection --metrics-recording-only --password-store=basic --test-type"
EOF
    mkdir -p "$r/etc/chromium/policies/managed"
    cat >"$r/etc/chromium/policies/managed/warren.json" <<'EOF'
{
  "BackgroundModeEnabled": false,
  "ComponentUpdatesEnabled": false,
  "MetricsReportingEnabled": false,
  "SafeBrowsingProtectionLevel": 0,
  "SearchSuggestEnabled": false,
  "NetworkPredictionOptions": 2,
  "SyncDisabled": true,
  "BrowserSignin": 0,
  "DefaultBrowserSettingEnabled": false,
  "PromotionsEnabled": false,
  "TranslateEnabled": false,
  "SpellcheckEnabled": false,
  "AutofillAddressEnabled": false,
  "AutofillCreditCardEnabled": false,
  "PasswordManagerEnabled": false,
  "UrlKeyedAnonymizedDataCollectionEnabled": false,
  "DnsOverHttpsMode": "off",
  "BuiltInDnsClientEnabled": false,
  "MediaRouterCastAllowAllIPs": false,
  "EnableMediaRouter": false,
  "ShoppingListEnabled": false,
  "HighEfficiencyModeEnabled": false,
  "WebRtcEventLogCollectionAllowed": false,
  "UserFeedbackAllowed": false
}
EOF
    # xdg-open and exo-open pick these (a terminal and the browser of the template).
    mkdir -p "$r/etc/xdg/xfce4"
    printf '%s\n' 'TerminalEmulator=xfce4-terminal' 'WebBrowser=chromium' >"$r/etc/xdg/xfce4/helpers.rc"
    return 0
}

profile_config() {
    printf '{"user": "user", "cwd": "/home/user", "setuid": true, "env": {"PATH": "%s", "LANG": "C.UTF-8", "DISPLAY": ":0"}}\n' "$PATH_ENV"
}
