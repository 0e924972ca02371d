/* SPDX-License-Identifier: Apache-2.0 */
/* The local terminal in raw mode while a remote terminal runs (cli.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

static struct termios saved_tio;
static bool tio_saved, restore_registered;

void cli_tty_restore(void)
{
    if (tio_saved)
        (void)tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = false;
}

void cli_tty_raw(void)
{
    struct termios t;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) < 0)
        return;
    tio_saved = true;
    if (!restore_registered)
        restore_registered = atexit(cli_tty_restore) == 0;
    t = saved_tio;
    cfmakeraw(&t);
    (void)tcsetattr(STDIN_FILENO, TCSANOW, &t);
}
