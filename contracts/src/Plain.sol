// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title Plain
/// @notice A contract implementing no token standard (no ERC-165, no name, symbol, decimals
/// or totalSupply): a counter.
contract Plain {
    uint256 public count;

    function increment() external {
        count += 1;
    }
}
