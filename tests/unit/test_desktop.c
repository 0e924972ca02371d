/* SPDX-License-Identifier: Apache-2.0 */
/* The desktop's input checks (src/core/desktop.c): key names mapped to X keysyms, and the text
 * that may be typed. Nothing here reaches a shell; what is refused never reaches xdotool. */
#include <string.h>

#include "../../src/core/desktop.h"
#include "tap.h"

static const char *map(const char *name)
{
    static char out[40];
    struct wr_err err;

    if (wr_desktop_key_map(name, out, sizeof(out), &err) < 0)
        return NULL;
    return out;
}

int main(void)
{
    struct wr_err err;
    char big[WR_DESKTOP_MAX_TEXT + 2];

    /* @e2b/desktop's names, case-insensitive. */
    is_str(map("enter"), "Return", "enter");
    is_str(map("ENTER"), "Return", "ENTER");
    is_str(map("ctrl"), "Control_L", "ctrl");
    is_str(map("cmd"), "Super_L", "cmd");
    is_str(map("page_down"), "Page_Down", "page_down");
    is_str(map("space"), "space", "space");
    is_str(map("f1"), "F1", "f1");
    is_str(map("F12"), "F12", "F12");
    is_str(map("f24"), "F24", "f24");
    /* keysyms as they are, and single characters */
    is_str(map("Return"), "Return", "a keysym");
    is_str(map("KP_Enter"), "KP_Enter", "KP_Enter");
    is_str(map("a"), "a", "a letter");
    is_str(map("A"), "A", "an upper-case letter stays");
    is_str(map("7"), "7", "a digit");
    is_str(map("+"), "plus", "+ by its name (it would split the chord)");
    is_str(map("/"), "slash", "/");
    is_str(map("~"), "asciitilde", "~");
    /* refused */
    ok(map("") == NULL, "empty");
    ok(map("ctrl+c") == NULL, "a chord in one name");
    ok(map("$(reboot)") == NULL, "shell syntax");
    ok(map("a b") == NULL, "a space inside");
    ok(map("-a") == NULL, "an option-looking name");
    ok(map("_x") == NULL, "starts with _");
    ok(map("abcdefghijabcdefghijabcdefghijabc") == NULL, "33 characters");
    ok(map("\xc3\xa9") == NULL, "non-ASCII");
    ok(map(" ") == NULL, "a space alone");
    ok(wr_desktop_key_map("x;y", big, sizeof(big), &err) < 0 && err.kind == WR_EINVAL &&
           strstr(err.msg, "x;y") != NULL,
       "the message names the key");

    ok(wr_desktop_text_check("hello", 5, &err) == 0, "text");
    ok(wr_desktop_text_check("a\tb\nc", 5, &err) == 0, "tab and newline");
    ok(wr_desktop_text_check("\xc3\xa9t\xc3\xa9", 5, &err) == 0, "UTF-8");
    ok(wr_desktop_text_check("$(rm -rf /); `x` 'y' \"z\"", 24, &err) == 0,
       "shell syntax is only text");
    ok(wr_desktop_text_check("", 0, &err) < 0, "empty");
    ok(wr_desktop_text_check("a\x07", 2, &err) < 0 && strstr(err.msg, "0x07") != NULL, "BEL");
    ok(wr_desktop_text_check("a\rb", 3, &err) < 0, "CR");
    ok(wr_desktop_text_check("a\x1b[1m", 5, &err) < 0, "an escape sequence");
    ok(wr_desktop_text_check("\x7f", 1, &err) < 0, "DEL");
    memset(big, 'x', sizeof(big));
    ok(wr_desktop_text_check(big, WR_DESKTOP_MAX_TEXT, &err) == 0, "the largest text");
    ok(wr_desktop_text_check(big, WR_DESKTOP_MAX_TEXT + 1, &err) < 0, "one byte more");
    return done();
}
