// SPDX-License-Identifier: Apache-2.0
// e2b@2.51.0 (creates with POST /v2/sandboxes).
import * as sdk from 'e2b';

import { suite } from './suite.mjs';

suite('e2b-2.51', sdk, 'E2B');
