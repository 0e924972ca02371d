// SPDX-License-Identifier: Apache-2.0
// e2b@2.50.0 (creates with POST /sandboxes, connects with POST /sandboxes/{id}/connect).
import * as sdk from 'e2b-old';

import { suite } from './suite.mjs';

suite('e2b-2.50', sdk, 'E2B');
