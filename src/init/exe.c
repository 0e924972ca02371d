/* SPDX-License-Identifier: Apache-2.0 */
/* The warren-init program: PID 1 of a sandbox whose creator exec's it (see entry.h). */
#include "entry.h"

int main(int argc, char **argv)
{
    wr_init_main(argc, argv);
}
