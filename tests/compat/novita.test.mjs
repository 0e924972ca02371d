// SPDX-License-Identifier: Apache-2.0
// novita-sandbox@2.1.1 (Novita-Sandbox-Id, NOVITA_* variables).
import * as sdk from 'novita-sandbox';

import { suite } from './suite.mjs';

suite('novita-2.1', sdk, 'NOVITA');
