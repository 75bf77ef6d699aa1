// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Multicall
/// @notice Calls one contract several times in one transaction, as itself. The real-time
/// benchmark (bench/ws.go) makes blocks of 100 ERC-20 Transfer events with it: 100 calls of
/// TestERC20.transfer, paid from the tokens this contract holds. A call that fails reverts the
/// whole transaction with that call's revert data.
contract Multicall {
    function aggregate(address target, bytes[] calldata calls) external {
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory ret) = target.call(calls[i]);
            if (!ok) {
                assembly {
                    revert(add(ret, 32), mload(ret))
                }
            }
        }
    }
}
